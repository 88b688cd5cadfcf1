"""JPEG frames for the live tests: real ones, and ones whose header lies about their size."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


def jpeg(width: int, height: int) -> bytes:
    ctx = av.CodecContext.create("mjpeg", "w")
    ctx.width, ctx.height, ctx.pix_fmt, ctx.time_base = width, height, "yuvj420p", Fraction(1, 30)
    rgb = np.random.default_rng(0).integers(0, 255, (height, width, 3), np.uint8)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")
    return b"".join(bytes(p) for p in [*ctx.encode(frame), *ctx.encode(None)])


def declaring(data: bytes, width: int, height: int) -> bytes:
    """The same JPEG with its frame header claiming another size."""
    at = data.index(b"\xff\xc0")
    return data[: at + 5] + height.to_bytes(2, "big") + width.to_bytes(2, "big") + data[at + 9 :]
