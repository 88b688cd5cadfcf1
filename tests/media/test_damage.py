"""A damaged file is voiced as far as it decodes, as long as the video, and says what was wrong:
undecodable packets are skipped (unless most are: that file is corrupt), and a file that breaks
off keeps its declared length, silent after its last frame."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from service.config import Settings
from service.errors import MediaError
from service.media.decode import DecodeLimits, open_video
from service.pipeline.types import RenderOptions
from tests.media import videos


def faststart_clip(path: Path, frames: int = 90) -> Path:
    """An MP4 with its index first (as streamed files are), so a cut leaves it readable."""
    with av.open(str(path), "w", container_options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 30)
        rng = np.random.default_rng(0)
        for _ in range(frames):
            rgb = rng.integers(0, 255, (120, 160, 3), np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        out.mux(stream.encode(None))
    return path


def with_damaged_packets(clip: Path, out: Path, packets: range) -> Path:
    data = bytearray(clip.read_bytes())
    with av.open(str(clip)) as container:
        spans = [(p.pos, p.size) for p in container.demux(video=0) if p.size]
    for pos, size in (spans[i] for i in packets):
        data[pos : pos + size] = b"\xff" * size
    out.write_bytes(bytes(data))
    return out


def decode(path: Path) -> tuple[int, tuple[str, ...]]:
    with open_video(path, width=32, height=32, limits=DecodeLimits.from_settings(Settings())) as s:
        frames = sum(len(batch.pts_s) for batch in s)
        return frames, s.notes


def test_a_damaged_stretch_is_skipped_and_said(tmp_path: Path) -> None:
    clip = videos.encode_clip(tmp_path / "ok.mp4", fps=30, frames=90, size=(160, 120)).path
    damaged = with_damaged_packets(clip, tmp_path / "damaged.mp4", range(30, 37))
    frames, notes = decode(damaged)
    assert 80 <= frames < 90
    assert len(notes) == 1 and "could not be decoded and were skipped" in notes[0]
    assert decode(clip) == (90, ())


def test_a_mostly_undecodable_stream_is_still_corrupt(tmp_path: Path) -> None:
    clip = videos.encode_clip(tmp_path / "ok.mp4", fps=30, frames=90, size=(160, 120)).path
    ruined = with_damaged_packets(clip, tmp_path / "ruined.mp4", range(10, 60))
    with pytest.raises(MediaError) as caught:
        decode(ruined)
    assert caught.value.code == "corrupt_data"


@pytest.mark.slow
@pytest.mark.parametrize("kept", [0.7, 0.9])
def test_a_file_cut_short_keeps_its_length_and_says_so(
    real_engine, tmp_path: Path, kept: float
) -> None:
    whole = faststart_clip(tmp_path / "whole.mp4")
    data = whole.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * kept)])
    result = real_engine.render(cut, tmp_path / "cut.wav", RenderOptions(format="wav"))
    assert result.frames < 90
    assert result.duration_s == pytest.approx(3.0, abs=0.05)
    assert any("the track runs on, silent" in w for w in result.warnings)
    clean = real_engine.render(whole, tmp_path / "whole.wav", RenderOptions(format="wav"))
    assert clean.warnings == () and clean.frames == 90


@pytest.mark.slow
def test_a_video_with_timestamps_out_of_order_renders_to_every_container(
    real_engine, tmp_path: Path
) -> None:
    clip = videos.encode_clip(tmp_path / "in.mkv", codec="mjpeg", fps=30, frames=12)
    videos.set_mkv_frame_times(clip.path, [0, 67, 33, 100, 133, 133, 200, 167, 233, 267, 267, 300])
    for container in ("wav", "mp4", "mov", "mkv"):
        out = tmp_path / f"out.{container}"
        result = real_engine.render(clip.path, out, RenderOptions(format=container))
        assert result.frames == 8 and out.stat().st_size > 0  # 4 times went back or repeated
        assert "4 video frames were left out of the sound" in result.warnings[0]
        moved = [w for w in result.warnings if "timestamps out of order or repeated" in w]
        assert len(moved) == (container != "wav")
