from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from service.errors import MediaError
from service.media.audio_out import AudioWriter
from service.media.mux import FOLEY_TITLE, FoleyMuxer, MuxContainer
from tests.media.videos import Clip, encode_clip, packet_bytes, set_mkv_frame_times

BURST_AT_S = 0.5  # a 10 ms 1 kHz burst in the Foley track, 0.5 s after the first video frame


def write_foley(path: Path, clip: Clip, rate: int = 48000) -> int:
    """A Foley WAV as the engine writes it: as long as the video, sample 0 = first frame."""
    n = round((clip.end_s - clip.pts_s[0]) * 48000)
    track = np.zeros(n, np.float32)
    at = round(BURST_AT_S * 48000)
    track[at : at + 480] = 0.8 * np.sin(2 * np.pi * 1000 * np.arange(480) / 48000)
    with AudioWriter(path, "wav", out_rate=rate) as writer:
        writer.write(track)
    return round(n * rate / 48000)


def mux_audio_into_video(
    video_path: Path,
    audio_wav_path: Path,
    output_path: Path,
    *,
    container: MuxContainer,
    start_s: float,
    replace_audio: bool = False,
) -> None:
    """Mux a finished mono WAV (sample 0 = the first video frame at `start_s`) at its own rate,
    handed to the muxer as the engine hands it a track."""
    with av.open(str(audio_wav_path)) as wav:
        rate = wav.streams.audio[0].rate
        to_float = av.AudioResampler(format="flt", layout="mono", rate=rate)
        with FoleyMuxer(
            video_path,
            output_path,
            container=container,
            start_s=start_s,
            in_rate=rate,
            out_rate=rate,
            replace_audio=replace_audio,
        ) as muxer:
            for frame in [*wav.decode(audio=0), None]:
                for out in to_float.resample(frame):
                    muxer.write(out.to_ndarray().reshape(-1))


def decode_output(path: Path) -> tuple[list[float], float, np.ndarray, int]:
    """What a player sees: video frame times, first audio frame time, audio samples, rate."""
    with av.open(str(path)) as container:
        video_times = [f.time for f in container.decode(video=0)]
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        frames = list(container.decode(stream))
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    return video_times, frames[0].time, samples, stream.rate


@pytest.mark.parametrize("fps", [Fraction(30000, 1001), 25])
@pytest.mark.parametrize("start_s", [0.0, 1.5])
@pytest.mark.parametrize("container", ["mp4", "mov", "mkv"])
def test_foley_track_starts_with_the_first_frame(
    tmp_path: Path, container: str, start_s: float, fps: Fraction
) -> None:
    clip = encode_clip(tmp_path / "in.mp4", fps=fps, frames=30, start_s=start_s)
    n = write_foley(tmp_path / "foley.wav", clip)
    out = tmp_path / f"out.{container}"
    mux_audio_into_video(
        clip.path, tmp_path / "foley.wav", out, container=container, start_s=clip.pts_s[0]
    )

    video_times, audio_start, samples, rate = decode_output(out)
    assert video_times[0] == pytest.approx(start_s, abs=1e-3)
    assert audio_start == pytest.approx(video_times[0], abs=1e-3)  # priming skipped
    burst = audio_start + np.argmax(np.abs(samples) > 0.1) / rate  # content, not just labels
    assert burst == pytest.approx(video_times[0] + BURST_AT_S, abs=1e-3)
    video_duration = clip.end_s - clip.pts_s[0]
    assert abs(len(samples) - video_duration * rate) <= 1024
    assert n <= len(samples)
    assert packet_bytes(out) == packet_bytes(clip.path)  # stream copy, not re-encoded
    with av.open(str(out)) as container_:
        kinds = [(s.type, s.codec_context.name) for s in container_.streams]
    assert kinds == [("video", "h264"), ("audio", "aac")]


@pytest.mark.parametrize("rate", [44100, 16000])
def test_other_sample_rates_stay_aligned(tmp_path: Path, rate: int) -> None:
    clip = encode_clip(tmp_path / "in.mkv", fps=25, frames=25, start_s=1.5)
    write_foley(tmp_path / "foley.wav", clip, rate=rate)
    mux_audio_into_video(
        clip.path,
        tmp_path / "foley.wav",
        tmp_path / "out.mp4",
        container="mp4",
        start_s=clip.pts_s[0],
    )
    video_times, audio_start, samples, out_rate = decode_output(tmp_path / "out.mp4")
    assert out_rate == rate
    assert audio_start == pytest.approx(video_times[0], abs=1e-3)
    burst = audio_start + np.argmax(np.abs(samples) > 0.1) / rate
    assert burst == pytest.approx(video_times[0] + BURST_AT_S, abs=1e-3)


@pytest.mark.parametrize(
    ("codec", "suffix", "container"),
    [
        ("libvpx-vp9", ".webm", "mkv"),
        ("libsvtav1", ".mkv", "mp4"),
        ("mpeg4", ".avi", "mp4"),
        ("prores_ks", ".mov", "mov"),
        ("libx265", ".mkv", "mov"),
    ],
)
def test_other_codecs_are_copied(tmp_path: Path, codec: str, suffix: str, container: str) -> None:
    clip = encode_clip(tmp_path / f"in{suffix}", codec=codec, fps=25, frames=20)
    write_foley(tmp_path / "foley.wav", clip)
    out = tmp_path / f"out.{container}"
    mux_audio_into_video(
        clip.path, tmp_path / "foley.wav", out, container=container, start_s=clip.pts_s[0]
    )
    assert packet_bytes(out) == packet_bytes(clip.path)
    video_times, audio_start, *_ = decode_output(out)
    assert audio_start == pytest.approx(video_times[0], abs=1e-3)


@pytest.mark.parametrize("container", ["mp4", "mov", "mkv"])
def test_the_original_audio_is_kept_bit_exact_and_the_foley_added_as_its_own_track(
    tmp_path: Path, container: str
) -> None:
    clip = encode_clip(tmp_path / "in.mp4", fps=25, frames=25, audio=True)
    write_foley(tmp_path / "foley.wav", clip, rate=44100)
    out = tmp_path / f"out.{container}"
    mux_audio_into_video(
        clip.path, tmp_path / "foley.wav", out, container=container, start_s=clip.pts_s[0]
    )
    with av.open(str(out)) as output:
        kinds = [(s.type, getattr(s, "rate", None)) for s in output.streams]
        original = [bytes(p) for p in output.demux(audio=0) if p.size]
        foley = output.streams.audio[1]
        title = foley.metadata.get("title", foley.metadata.get("name"))  # mkv / mp4, mov
        language = foley.metadata.get("language", "und")
        layout = foley.codec_context.layout.name
    assert kinds == [("video", None), ("audio", 48000), ("audio", 44100)]
    assert original == packet_bytes(clip.path, "audio")
    assert (title, language, layout) == (FOLEY_TITLE, "und", "mono")
    mux_audio_into_video(
        clip.path, tmp_path / "foley.wav", out, container=container, start_s=clip.pts_s[0],
        replace_audio=True,
    )  # fmt: skip
    with av.open(str(out)) as output:
        assert [
            s.metadata.get("handler_name", s.metadata.get("title")) for s in output.streams.audio
        ] == [FOLEY_TITLE]


def test_a_codec_the_container_cannot_hold_is_a_typed_error(tmp_path: Path) -> None:
    clip = encode_clip(tmp_path / "in.mov", codec="prores_ks", fps=25, frames=20)
    write_foley(tmp_path / "foley.wav", clip)
    out = tmp_path / "out.mp4"
    with pytest.raises(MediaError) as caught:
        mux_audio_into_video(
            clip.path, tmp_path / "foley.wav", out, container="mp4", start_s=clip.pts_s[0]
        )
    assert caught.value.code == "incompatible_container"
    assert not out.exists()


def test_streamed_chunks_mux_like_one_track(tmp_path: Path) -> None:
    """The engine hands the track over window by window at the model's rate; the muxed track is
    the same, and as long, as when the whole track is written at once."""
    clip = encode_clip(tmp_path / "in.mp4", fps=25, frames=40, start_s=0.7)
    n = round((clip.end_s - clip.pts_s[0]) * 48000)
    track = (0.3 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)
    decoded = []
    for name, sizes in [("whole", [n]), ("windows", [1, 999, 5000, 17, 20000])]:
        out = tmp_path / f"{name}.mp4"
        with FoleyMuxer(
            clip.path, out, container="mp4", start_s=clip.pts_s[0], in_rate=48000, out_rate=44100
        ) as muxer:
            for chunk in np.split(track, np.cumsum(sizes)):
                muxer.write(chunk)
        video_times, audio_start, samples, rate = decode_output(out)
        assert rate == 44100
        assert audio_start == pytest.approx(video_times[0], abs=1e-3)
        assert 0 <= len(samples) - round(n * 44100 / 48000) < 1024  # whole AAC frames
        decoded.append(samples)
    np.testing.assert_allclose(decoded[1], decoded[0], atol=1e-6)


def test_a_failed_render_leaves_no_partial_video(tmp_path: Path) -> None:
    clip = encode_clip(tmp_path / "in.mp4", fps=25, frames=20)
    out = tmp_path / "out.mp4"
    with (
        pytest.raises(RuntimeError, match="inference failed"),
        FoleyMuxer(
            clip.path, out, container="mp4", start_s=clip.pts_s[0], in_rate=48000, out_rate=48000
        ) as muxer,
    ):
        muxer.write(np.zeros(48000, np.float32))
        raise RuntimeError("inference failed")
    assert not out.exists()


# Stored in this order: 33 ms comes after 67 ms, 133 and 267 ms twice.
DISORDERED_MS = [0, 67, 33, 100, 133, 133, 200, 167, 233, 267, 267, 300]


def disordered_mkv(path: Path) -> Path:
    clip = encode_clip(path, codec="mjpeg", fps=30, frames=len(DISORDERED_MS))
    set_mkv_frame_times(clip.path, DISORDERED_MS)
    return clip.path


@pytest.mark.parametrize(("container", "moved"), [("mp4", 4), ("mov", 4), ("mkv", 2)])
def test_timestamps_out_of_order_or_repeated_are_moved_not_refused(
    tmp_path: Path, container: str, moved: int
) -> None:
    """A container that cannot store a decode time going back (any) or repeating (MP4, MOV)
    gets the next time it can, as FFmpeg's command line gives it; every frame is kept."""
    source = disordered_mkv(tmp_path / "in.mkv")
    out = tmp_path / f"out.{container}"
    with FoleyMuxer(
        source, out, container=container, start_s=0.0, in_rate=48000, out_rate=48000
    ) as muxer:
        muxer.write(np.zeros(16000, np.float32))
    assert len(muxer.notes) == 1 and muxer.notes[0].startswith(f"{moved} packets of the video")
    assert packet_bytes(out) == packet_bytes(source)
    with av.open(str(out)) as written:
        stream = written.streams.video[0]
        dts = [p.dts * stream.time_base for p in written.demux(stream) if p.size]
    steps = np.diff(np.array(dts, float))
    assert (steps > 0).all() if container != "mkv" else (steps >= 0).all()
    assert float(dts[-1]) <= DISORDERED_MS[-1] / 1000 + 0.01  # moved by a tick, not a frame


def test_timestamps_in_order_are_copied_as_they_are(tmp_path: Path) -> None:
    clip = encode_clip(tmp_path / "in.mkv", codec="mjpeg", fps=30, frames=12)
    out = tmp_path / "out.mp4"
    with FoleyMuxer(
        clip.path, out, container="mp4", start_s=0.0, in_rate=48000, out_rate=48000
    ) as muxer:
        muxer.write(np.zeros(16000, np.float32))
    assert muxer.notes == ()


def test_packets_without_timestamps_are_given_them(tmp_path: Path) -> None:
    """FFmpeg reads Matroska blocks timed before zero without any timestamps; they are copied
    one frame apart from the first frame's time, as `-fflags +genpts` would."""
    clip = encode_clip(tmp_path / "in.mkv", fps=30, frames=12)
    with av.open(str(clip.path)) as source:
        stored = [p.pts for p in source.demux(video=0) if p.size]
    set_mkv_frame_times(clip.path, [t - 1000 for t in stored])
    with av.open(str(clip.path)) as source:
        assert {(p.pts, p.dts) for p in source.demux(video=0) if p.size} == {(None, None)}
    out = tmp_path / "out.mp4"
    with FoleyMuxer(
        clip.path, out, container="mp4", start_s=0.5, in_rate=48000, out_rate=48000
    ) as muxer:
        muxer.write(np.zeros(16000, np.float32))
    assert muxer.notes == ("12 packets of the video had no timestamps: each was given the time "
                           "one frame after the one before",)  # fmt: skip
    assert packet_bytes(out) == packet_bytes(clip.path)
    with av.open(str(out)) as written:
        stream = written.streams.video[0]
        dts = [float(p.dts * stream.time_base) for p in written.demux(stream) if p.size]
    np.testing.assert_allclose(dts, 0.5 + np.arange(12) / 30, atol=1e-3)
