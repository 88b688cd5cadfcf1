"""Real media files and hostile uploads, made by the tests themselves."""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path


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
