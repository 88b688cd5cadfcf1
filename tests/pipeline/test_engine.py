"""End to end through FoleyEngine with the shipped model: the track starts on the first video
frame and lasts exactly as long as the video, in every output format."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from service.pipeline.types import RenderOptions
from tests.media import videos


def _audio(path: Path) -> tuple[float, int, int]:
    """(first audio frame time, decoded samples, rate) as a player would see them."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        frames = list(container.decode(stream))
    return float(frames[0].time), sum(f.samples for f in frames), stream.rate


def _video_span(path: Path) -> tuple[float, float]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times = [float(f.time) for f in container.decode(stream)]
        return times[0], times[-1] + float(1 / stream.average_rate)


@pytest.mark.parametrize("rate", [48000, 44100, 16000])
@pytest.mark.parametrize("fps", [Fraction(30000, 1001), Fraction(25)])
def test_wav_track_lasts_as_long_as_the_video(
    real_engine, tmp_path: Path, fps: Fraction, rate: int
) -> None:
    clip = videos.encode_clip(tmp_path / "in.mp4", fps=fps, frames=47, size=(96, 64), start_s=1.5)
    result = real_engine.render(
        clip.path, tmp_path / "out.wav", RenderOptions(format="wav", sample_rate=rate)
    )
    duration = clip.end_s - clip.pts_s[0]
    assert result.start_s == pytest.approx(clip.pts_s[0], abs=1e-6)
    assert result.duration_s == pytest.approx(duration, abs=1e-6)
    _, samples, got_rate = _audio(tmp_path / "out.wav")
    assert got_rate == rate
    assert abs(samples - round(duration * rate)) <= 1


@pytest.mark.parametrize("container", ["mp4", "mov", "mkv"])
@pytest.mark.parametrize("start_s", [0.0, 1.5])
def test_muxed_track_starts_on_the_first_video_frame(
    real_engine, tmp_path: Path, container: str, start_s: float
) -> None:
    clip = videos.encode_clip(
        tmp_path / f"in.{container}",
        fps=Fraction(30000, 1001),
        frames=60,
        size=(96, 64),
        start_s=start_s,
    )
    out = tmp_path / f"out.{container}"
    real_engine.render(clip.path, out, RenderOptions(format=container))
    first_video, end_video = _video_span(out)
    first_audio, samples, rate = _audio(out)
    assert first_audio == pytest.approx(first_video, abs=1e-3)
    assert abs(samples / rate - (end_video - first_video)) <= 1024 / rate
    assert videos.packet_bytes(out) == videos.packet_bytes(clip.path)  # stream copied


def test_a_static_clip_stays_quiet(real_engine, tmp_path: Path) -> None:
    """Nothing moves, nothing sounds: three seconds of one frame give (near) silence."""
    image = np.full((72, 128, 3), 120, np.uint8)
    image[40:56, 60:76] = (200, 40, 40)  # an object at rest on the floor
    path = tmp_path / "still.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 128, 72, "yuv420p"
        for _ in range(90):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())
    result = real_engine.render(path, tmp_path / "still.wav", RenderOptions(format="wav"))
    assert result.events_s == ()
    with av.open(str(tmp_path / "still.wav")) as container:
        audio = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    rms = np.sqrt(np.mean((audio / 32768.0) ** 2))
    assert rms < 10 ** (-50 / 20)


def test_the_render_reports_the_contact_events_it_fired(real_engine, tmp_path: Path) -> None:
    sample = Path(__file__).parents[2] / "samples" / "sample.mp4"
    result = real_engine.render(sample, tmp_path / "sample.wav", RenderOptions(format="wav"))
    events = np.asarray(result.events_s)
    assert len(events) >= 1
    assert np.all(np.diff(events) > 0)
    assert events[0] >= 0 and events[-1] < result.duration_s


def test_a_render_echoes_the_options_it_used(real_engine, tmp_path: Path) -> None:
    sample = Path(__file__).parents[2] / "samples" / "sample.mp4"
    asked = RenderOptions(format="flac", sample_rate=16000, loudness=None)
    result = real_engine.render(sample, tmp_path / "sample.flac", asked)
    assert result.options == dataclasses.replace(asked, tier=real_engine.tier.name)
    with av.open(str(tmp_path / "sample.flac")) as container:
        assert container.streams.audio[0].rate == 16000
