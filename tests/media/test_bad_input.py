"""Hostile and broken uploads: each is refused with a typed error and a stable code, quickly."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from service.errors import LimitExceeded, MediaError
from service.media import decode
from service.media.decode import DecodeLimits, open_video, probe
from service.media.worker import DecodeJob
from tests.media import faults, videos


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _truncated(p: Path) -> None:
    videos.encode_clip(p.with_suffix(".full.mp4"), frames=60)
    data = p.with_suffix(".full.mp4").read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _random(p: Path) -> None:
    p.write_bytes(np.random.default_rng(0).integers(0, 256, 100_000, np.uint8).tobytes())


def _text(p: Path) -> None:
    p.write_text("This is a text file renamed to .mp4, not a video.\n" * 40)


def _pdf(p: Path) -> None:
    p.write_bytes(
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def _zip(p: Path) -> None:
    with zipfile.ZipFile(p, "w") as archive:
        archive.writestr("notes.txt", "not a video " * 100)


BAD_FILES: list[tuple[str, Callable[[Path], None], type[Exception], str]] = [
    ("empty", _empty, MediaError, "empty_file"),
    ("truncated_mp4", _truncated, MediaError, "not_a_video"),
    ("random_bytes", _random, MediaError, "not_a_video"),
    ("text", _text, MediaError, "not_a_video"),
    ("pdf", _pdf, MediaError, "not_a_video"),
    ("zip", _zip, MediaError, "not_a_video"),
    ("audio_only", videos.write_audio_only, MediaError, "no_video_stream"),
    ("no_streams", videos.write_mp4_without_tracks, MediaError, "no_video_stream"),
    ("header_100000x100000", videos.write_huge_mjpeg_avi, MediaError, "corrupt_data"),
]


@pytest.mark.parametrize(
    ("make", "error", "code"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES]
)
def test_bad_files_are_refused_quickly(
    tmp_path: Path,
    limits: DecodeLimits,
    make: Callable[[Path], None],
    error: type[Exception],
    code: str,
) -> None:
    path = tmp_path / "upload.mp4"
    make(path)
    for entry_point in (_decode_everything, _probe):
        started = time.perf_counter()
        with pytest.raises(error) as caught:
            entry_point(path, limits)
        assert caught.value.code == code
        assert time.perf_counter() - started < 2.0


def _decode_everything(path: Path, limits: DecodeLimits) -> None:
    with open_video(path, width=64, height=64, limits=limits) as stream:
        for _ in stream:
            pass


def _probe(path: Path, limits: DecodeLimits) -> None:
    probe(path, limits=limits)


def test_zero_frames(tmp_path: Path, limits: DecodeLimits) -> None:
    path = tmp_path / "upload.avi"
    videos.write_without_frames(path)
    assert probe(path, limits=limits).codec == "mpeg4"  # the header alone is fine
    with pytest.raises(MediaError) as caught:
        _decode_everything(path, limits)
    assert caught.value.code == "no_frames"


def test_max_pixels_rejects_a_large_header_before_decoding(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    path = tmp_path / "upload.avi"
    videos.write_mpeg4_avi_declaring(path, 8000, 8000)  # 64 Mpixel: FFmpeg would allocate it
    started = time.perf_counter()
    with pytest.raises(LimitExceeded) as caught:
        probe(path, limits=limits)
    assert caught.value.code == "too_many_pixels"
    assert "8000x8000" in caught.value.reason
    assert time.perf_counter() - started < 2.0


def test_a_declared_huge_h264_frame_is_refused_without_being_allocated(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    """Opening a file decodes a frame to learn what its headers leave out: at 16000x16000
    4:4:4 10-bit that is 1.5 GB. The pixel limit reaches that decoder, so the header's size is
    refused having allocated none of it (peak RSS of a process that only opens the file)."""
    path = tmp_path / "upload.mp4"
    videos.write_h264_declaring(path, 16000, 16000)
    assert path.stat().st_size < 4096
    with pytest.raises(LimitExceeded) as caught:
        probe(path, limits=limits)
    assert caught.value.code == "too_many_pixels"
    assert "16000x16000" in caught.value.reason
    # VmHWM, not ru_maxrss: a child's ru_maxrss keeps its parent's peak (the test process's)
    # across exec; VmHWM is its own image's.
    opening = f"""
import re, sys
from pathlib import Path
from service.errors import LimitExceeded
from service.media.source import open_input
try:
    open_input(sys.argv[1], max_pixels={limits.max_pixels})
except LimitExceeded as exc:
    peak = re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())
    print(exc.code, peak.group(1))
"""
    run = subprocess.run(
        [sys.executable, "-c", opening, str(path)], capture_output=True, text=True, check=True
    )
    code, peak_kib = run.stdout.split()
    assert code == "too_many_pixels" and int(peak_kib) * 1024 < 400 * 2**20


def test_max_pixels_applies_to_a_real_clip(tmp_path: Path, limits: DecodeLimits) -> None:
    clip = videos.encode_clip(tmp_path / "upload.mkv", size=(320, 240), frames=5)
    small = dataclasses.replace(limits, max_pixels=320 * 240 - 1)
    with pytest.raises(LimitExceeded) as caught:
        _decode_everything(clip.path, small)
    assert caught.value.code == "too_many_pixels"


def test_max_pixels_stops_a_mid_stream_resolution_change(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    path = tmp_path / "upload.mkv"
    videos.write_resolution_switch_mkv(path, [(64, 48), (320, 240)])
    small = dataclasses.replace(limits, max_pixels=64 * 48)
    with open_video(path, width=64, height=48, limits=small, batch_size=1) as stream:
        assert (stream.info.width, stream.info.height) == (64, 48)
        decoded = 0
        with pytest.raises(MediaError) as caught:
            for batch in stream:
                decoded += len(batch.pts_s)
    assert caught.value.code == "corrupt_data"  # the decoder's own max_pixels refused the SPS
    assert decoded <= 10


def test_declared_12_hour_duration_is_refused_from_the_header(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    clip = videos.encode_clip(tmp_path / "upload.mkv", frames=10)
    videos.patch_mkv_duration(clip.path, 12 * 3600)
    started = time.perf_counter()
    with pytest.raises(LimitExceeded) as caught:
        _decode_everything(clip.path, limits)
    assert caught.value.code == "too_long"
    assert time.perf_counter() - started < 2.0


def test_decoding_stops_when_timestamps_pass_the_duration_limit(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    clip = videos.encode_clip(tmp_path / "upload.mkv", frames=60, fps=30)
    videos.patch_mkv_duration(clip.path, 0.5)  # the header lies: 2 s of frames follow
    short = dataclasses.replace(limits, max_duration_s=1.0)
    assert probe(clip.path, limits=short).duration_s == pytest.approx(0.5)
    decoded = []
    with (
        pytest.raises(LimitExceeded) as caught,
        open_video(clip.path, width=64, height=48, limits=short, batch_size=1) as stream,
    ):
        decoded.extend(float(b.pts_s[0]) for b in stream)
    assert caught.value.code == "too_long"
    assert decoded and max(decoded) <= 1.0


# Playlists: FFmpeg would follow them to other files (or URLs) --------------------------------


def _playlists(target: Path) -> dict[str, str]:
    return {
        "ffconcat.mp4": f"ffconcat version 1.0\nfile '{target.name}'\n",
        "hls.mp4": f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n{target.name}\n"
        "#EXT-X-ENDLIST\n",
        "hls.m3u8": f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n{target.name}\n"
        "#EXT-X-ENDLIST\n",
    }


def test_playlists_would_read_the_file_they_name_without_the_whitelist(tmp_path: Path) -> None:
    """The attack is real: plain av.open follows these playlists to a local file."""
    target = videos.encode_clip(tmp_path / "secret.mp4", frames=5).path
    for name in ("ffconcat.mp4", "hls.m3u8"):
        (tmp_path / name).write_text(_playlists(target)[name])
        with av.open(str(tmp_path / name), options={"protocol_whitelist": "file"}) as container:
            assert len(list(container.decode(video=0))) == 5


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("ffconcat.mp4", "unsupported_container"),
        ("hls.m3u8", "unsupported_container"),
        ("hls.mp4", "not_a_video"),
    ],
)
def test_playlists_are_refused_without_opening_the_file_they_name(
    tmp_path: Path, limits: DecodeLimits, name: str, code: str
) -> None:
    # A FIFO: had FFmpeg opened it, it would block there and the error would be a timeout.
    target = tmp_path / "secret.mp4"
    os.mkfifo(target)
    (tmp_path / name).write_text(_playlists(target)[name])
    opened = _watch_fifo(target)
    quick = dataclasses.replace(limits, stall_timeout_s=3.0)
    with pytest.raises(MediaError) as caught:
        _decode_everything(tmp_path / name, quick)
    assert caught.value.code == code
    assert not opened.is_set()


def _watch_fifo(path: Path) -> threading.Event:
    """Set the event if anyone opens `path` for reading within the next seconds."""
    opened = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO while nobody reads
            except OSError:
                time.sleep(0.005)
                continue
            opened.set()
            os.close(fd)
            return

    threading.Thread(target=watch, daemon=True).start()
    return opened


# The decoder child crashing or hanging ------------------------------------------------------


def _job(path: Path, limits: DecodeLimits) -> DecodeJob:
    return DecodeJob(str(path), 64, 48, limits, batch_size=8, decode_frames=True)


def test_a_crashing_decoder_is_decoder_crashed(tmp_path: Path, limits: DecodeLimits) -> None:
    clip = videos.encode_clip(tmp_path / "clip.mp4", frames=10)
    stream = decode._start(_job(clip.path, limits), target=faults.crash)
    with stream, pytest.raises(MediaError) as caught:
        list(stream)
    assert caught.value.code == "decoder_crashed"
    assert "SIGSEGV" in caught.value.reason


def test_a_hanging_decoder_is_killed_after_the_stall_timeout(
    tmp_path: Path, limits: DecodeLimits
) -> None:
    clip = videos.encode_clip(tmp_path / "clip.mp4", frames=10)
    quick = dataclasses.replace(limits, stall_timeout_s=0.5)
    stream = decode._start(_job(clip.path, quick), target=faults.hang)
    process = stream._process
    started = time.perf_counter()
    with stream, pytest.raises(MediaError) as caught:
        list(stream)
    assert caught.value.code == "decoder_timeout"
    assert 0.5 <= time.perf_counter() - started < 1.5
    with pytest.raises(ValueError, match="closed"):
        process.is_alive()  # joined and released by close()


def test_closing_early_kills_the_child(tmp_path: Path, limits: DecodeLimits) -> None:
    clip = videos.encode_clip(tmp_path / "clip.mp4", frames=200)
    with open_video(clip.path, width=64, height=48, limits=limits, batch_size=2) as stream:
        pid = stream._process.pid
        next(iter(stream))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_decoder_out_of_memory_is_a_clean_refusal(tmp_path: Path, limits: DecodeLimits) -> None:
    # 4K frames in a decoder capped at 150 MiB: FFmpeg's buffers cannot be had. The child says
    # so and ends; it neither grows without bound nor crashes.
    path = videos.encode_clip(tmp_path / "uhd.mp4", fps=30, frames=3, size=(4096, 2160)).path
    capped = dataclasses.replace(limits, memory_bytes=150 * 2**20)
    with pytest.raises(LimitExceeded) as caught:
        _decode_everything(path, capped)
    assert caught.value.code == "decoder_memory"
    _decode_everything(path, dataclasses.replace(limits, memory_bytes=2 * 2**30))  # the default
