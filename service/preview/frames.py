"""A live frame's payload (raw RGB or JPEG) -> the model's RGB input, through PyAV like a decoded
video's frames (same scaler), so the live path sees what the offline path sees."""

from __future__ import annotations

import av
import numpy as np

from service.media.frames import FrameScaler
from service.preview.protocol import SessionConfig


class FrameDecoder:
    """Not thread-safe: one per session (the worker thread calls it)."""

    def __init__(
        self, config: SessionConfig, width: int, height: int, *, letterbox: bool = False
    ) -> None:
        """`letterbox`: keep the picture's shape (service.media.frames.FrameScaler)."""
        self.config = config
        self._scaler = FrameScaler(width, height, letterbox=letterbox)
        self._jpeg = av.CodecContext.create("mjpeg", "r") if config.pixel_format == "jpeg" else None

    def __call__(self, payload: memoryview) -> np.ndarray:
        """(height, width, 3) uint8 at the model's size; ValueError with a reason if the
        payload is not a frame of the session's size and format."""
        w, h = self.config.width, self.config.height
        if self._jpeg is None:
            if len(payload) != w * h * 3:
                raise ValueError(f"{len(payload)} bytes, a {w}x{h} rgb24 frame has {w * h * 3}")
            rgb = np.frombuffer(payload, np.uint8).reshape(h, w, 3)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        else:
            declared = jpeg_size(payload)
            if declared != (w, h):
                size = "no" if declared is None else f"a {declared[0]}x{declared[1]}"
                raise ValueError(f"{size} JPEG frame header, the session is {w}x{h}")
            try:
                frames = self._jpeg.decode(av.Packet(bytes(payload)))
            except av.FFmpegError as exc:
                raise ValueError(f"not a decodable JPEG ({exc})") from None
            if len(frames) != 1:
                raise ValueError("not a decodable JPEG")
            frame = frames[0]
            if (frame.width, frame.height) != (w, h):
                raise ValueError(f"a {frame.width}x{frame.height} JPEG, the session is {w}x{h}")
        return self._scaler(frame)


# Start-of-frame markers: baseline, extended, progressive, lossless, hierarchical and arithmetic
# variants (0xC4 DHT, 0xC8 JPG and 0xCC DAC are not frames).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_size(data: memoryview | bytes) -> tuple[int, int] | None:
    """(width, height) a JPEG's frame header declares, read without decoding anything (a small
    file can declare 16000x16000, which the decoder would allocate); None without one."""
    data = memoryview(data)
    if bytes(data[:2]) != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _SOF:
            if i + 9 > len(data):
                return None
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return width, height
        if marker == 0xDA or length < 2:  # scan data before any frame header, or corrupt
            return None
        i += 2 + length
    return None
