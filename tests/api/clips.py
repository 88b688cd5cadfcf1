"""Real media files and hostile uploads, made by the tests themselves."""

from __future__ import annotations

import io
import random
import zipfile
from fractions import Fraction
from pathlib import Path

import av
import numpy as np


def moving_square_mp4(
    path: Path, *, seconds: float = 2.0, fps: int = 25, size: tuple[int, int] = (160, 120)
) -> Path:
    """An H.264 mp4 of a white square sliding over grey, one position per frame."""
    width, height = size
    side = height // 4
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        frames = round(seconds * fps)
        for i in range(frames):
            image = np.full((height, width, 3), 96, np.uint8)
            x = (width - side) * i // max(frames - 1, 1)
            image[height // 2 - side // 2 : height // 2 + side // 2, x : x + side] = 255
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return path


def audio_only_m4a(path: Path, *, seconds: float = 1.0, rate: int = 48000) -> Path:
    """An mp4 container with one AAC stream and no video."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate, layout="mono")
        t = np.arange(round(seconds * rate)) / rate
        tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        for start in range(0, len(tone), 1024):
            frame = av.AudioFrame.from_ndarray(
                tone[None, start : start + 1024], format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def hls_playlist(target: Path) -> bytes:
    """An HLS playlist whose one segment is a file on the server's disk."""
    return (
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXT-X-MEDIA-SEQUENCE:0\n"
        f"#EXTINF:2.0,\nfile://{target.resolve()}\n#EXT-X-ENDLIST\n"
    ).encode()


def ffconcat_playlist(target: Path) -> bytes:
    """An ffconcat script that splices in a file from the server's disk."""
    return f"ffconcat version 1.0\nfile '{target.resolve()}'\n".encode()


def ffconcat_self_reference(own_name: str) -> bytes:
    """An ffconcat script naming itself: FFmpeg follows it until it runs out of descriptors."""
    return f"ffconcat version 1.0\nfile '{own_name}'\n".encode()


def pdf_bytes() -> bytes:
    return (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n"
    )


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("clip.mp4", b"not a video " * 100)
    return buffer.getvalue()


def text_bytes() -> bytes:
    return b"This is a plain text file, not a video.\n" * 50


def random_bytes(size: int = 64 * 1024, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)
