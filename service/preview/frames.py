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
