from __future__ import annotations

import fcntl
import struct
import termios
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from service.media.decode import DecodeLimits, FrameBatch, open_video, probe
from service.media.frames import FrameScaler
from tests.media.videos import BACKGROUND, SQUARE, Clip, encode_clip, square_x


def decode_all(
    path: Path, limits: DecodeLimits, size: tuple[int, int] = (64, 48), batch_size: int = 32
) -> tuple[FrameBatch, float, int]:
    with open_video(
        path, width=size[0], height=size[1], limits=limits, batch_size=batch_size
    ) as stream:
        batches = list(stream)
        assert stream.frames == sum(len(b.pts_s) for b in batches)
        pts = np.concatenate([b.pts_s for b in batches])
        rgb = np.concatenate([b.rgb for b in batches])
        return FrameBatch(pts, rgb), stream.end_s, stream.frames


def assert_decodes_as_encoded(clip: Clip, limits: DecodeLimits) -> FrameBatch:
    frames, end_s, n = decode_all(clip.path, limits, clip.size)
    assert n == len(clip.pts_s)
    assert frames.pts_s.dtype == np.float64
    np.testing.assert_allclose(frames.pts_s, clip.pts_s, rtol=0, atol=1e-9)
    assert np.all(np.diff(frames.pts_s) > 0)
    assert end_s == pytest.approx(clip.end_s, abs=1e-6)
    assert frames.rgb.shape == (n, clip.size[1], clip.size[0], 3)
    assert frames.rgb.dtype == np.uint8
    for i, image in enumerate(frames.rgb):  # the right frame, in the right order
        bright = image[8 : 8 + SQUARE].mean(axis=(0, 2)) > (BACKGROUND + 255) / 2
        assert abs(int(np.argmax(bright)) - square_x(i, clip.size[0])) <= 1
    return frames


@pytest.mark.parametrize("fps", [30, Fraction(30000, 1001), 24, 25, 60])
def test_constant_frame_rates_keep_the_encoded_pts(
    tmp_path: Path, limits: DecodeLimits, fps: Fraction | int
) -> None:
    clip = encode_clip(tmp_path / "clip.mp4", fps=fps, frames=30)
    assert clip.pts_s[1] == pytest.approx(1 / fps, abs=1e-6)
    assert_decodes_as_encoded(clip, limits)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_variable_frame_rate_keeps_the_real_pts(
    tmp_path: Path, limits: DecodeLimits, suffix: str
) -> None:
    gaps = np.tile([0.020, 0.050, 0.033, 0.100, 0.017], 6)
    times = np.concatenate([[0.0], np.cumsum(gaps)])[:30].round(3)
    clip = encode_clip(tmp_path / f"vfr{suffix}", fps=30, times_s=times.tolist())
    np.testing.assert_allclose(clip.pts_s, times, atol=1e-4)
    assert_decodes_as_encoded(clip, limits)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".mov"])
def test_start_offset_is_kept(tmp_path: Path, limits: DecodeLimits, suffix: str) -> None:
    clip = encode_clip(tmp_path / f"late{suffix}", fps=Fraction(30000, 1001), start_s=1.5)
    assert clip.pts_s[0] == pytest.approx(1.5, abs=1e-3)
    frames = assert_decodes_as_encoded(clip, limits)
    info = probe(clip.path, limits=limits)
    assert info.start_s == pytest.approx(frames.pts_s[0], abs=1e-3)
    assert info.duration_s == pytest.approx(clip.end_s - clip.pts_s[0], abs=2e-3)


CODECS = [  # (encoder, container): every video encoder this PyAV build has
    ("libx264", ".mp4"),
    ("libx264", ".mov"),
    ("libx265", ".mp4"),
    ("libx265", ".mkv"),
    ("libvpx-vp9", ".webm"),
    ("libvpx", ".webm"),
    ("libsvtav1", ".mkv"),
    ("libsvtav1", ".mp4"),
    ("mpeg4", ".avi"),
    ("prores_ks", ".mov"),
    ("mjpeg", ".avi"),
]


@pytest.mark.parametrize(("codec", "suffix"), CODECS)
def test_codecs_and_containers(
    tmp_path: Path, limits: DecodeLimits, codec: str, suffix: str
) -> None:
    clip = encode_clip(tmp_path / f"clip{suffix}", codec=codec, fps=25, frames=20)
    assert_decodes_as_encoded(clip, limits)
    info = probe(clip.path, limits=limits)
    assert (info.width, info.height, info.fps, info.has_audio) == (64, 48, 25.0, False)
    assert info.duration_s == pytest.approx(0.8, abs=0.05)


def test_info_and_resize(tmp_path: Path, limits: DecodeLimits) -> None:
    clip = encode_clip(tmp_path / "clip.mkv", size=(160, 96), frames=10, audio=True)
    with open_video(clip.path, width=32, height=24, limits=limits, batch_size=4) as stream:
        info = stream.info
        shapes = [b.rgb.shape for b in stream]
    assert (info.container, info.codec) == ("matroska,webm", "h264")
    assert (info.width, info.height, info.has_audio) == (160, 96, True)
    assert shapes == [(4, 24, 32, 3), (4, 24, 32, 3), (2, 24, 32, 3)]
    assert probe(clip.path, limits=limits) == info


def test_child_blocks_while_the_parent_does_not_read(tmp_path: Path, limits: DecodeLimits) -> None:
    clip = encode_clip(tmp_path / "long.mp4", frames=300)
    with open_video(clip.path, width=64, height=48, limits=limits, batch_size=4) as stream:
        batches = iter(stream)
        next(batches)
        time.sleep(0.5)  # decoding all 300 frames takes ~0.1 s when nobody waits
        queued = struct.unpack(
            "i", fcntl.ioctl(stream._conn.fileno(), termios.FIONREAD, b"\0\0\0\0")
        )[0]
        assert stream._process.exitcode is None  # still blocked in send
        assert queued <= 64 * 1024 + 4 * 64 * 48 * 3  # one pipe's worth, not the clip
        assert 1 + sum(1 for _ in batches) == 75


@pytest.mark.parametrize("crf", [23, 40])
def test_skipping_the_deblocking_filter_leaves_model_input_unchanged(
    tmp_path: Path, limits: DecodeLimits, crf: int
) -> None:
    """The service decodes without H.264's in-loop deblocking filter (28 % less decoder CPU).
    At the model's input size the frames stay within a grey level of a full decode, even for a
    heavily compressed file (crf 40: blocky, and errors carry over from frame to frame)."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"
    with av.open(str(sample)) as src:
        images = [f.to_ndarray(format="rgb24") for f in src.decode(video=0)]
    path = tmp_path / f"crf{crf}.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"crf": str(crf), "g": "150"})
        stream.height, stream.width = images[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        for image in images:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode(None))
    scaler = FrameScaler(96, 96)
    with av.open(str(path)) as src:  # FFmpeg's default decode, deblocked
        reference = np.stack([scaler(f) for f in src.decode(video=0)]).astype(int)
    frames, _, _ = decode_all(path, limits, (96, 96))
    diff = np.abs(frames.rgb.astype(int) - reference)
    assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 4, (diff.mean(), diff.max())
