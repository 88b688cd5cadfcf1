"""The one place a video frame becomes model input pixels.

Training data goes through this same code (engines render RGB, convert to yuv420p like a real
decode, then scale with `FrameScaler`), so the model sees the same scaler and chroma handling at
training and at serving time.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
from av.video.reformatter import VideoReformatter

# AREA averages all source pixels of an output pixel: no aliasing when shrinking 1280x720 to
# 96x96, where bilinear would sample a few pixels and flicker on fine texture.
INTERPOLATION = "AREA"


class FrameScaler:
    """Decoded frame (any size, any pixel format) -> (height, width, 3) uint8 RGB.

    Keeps one swscale context for a stream: `frame.to_ndarray(width=..., height=...)` builds a
    new one per frame, which costs several times the H.264 decode itself. Not thread-safe: one
    per stream.
    """

    def __init__(
        self,
        width: int,
        height: int,
        *,
        letterbox: bool = False,
        sample_aspect: Fraction | None = None,
    ) -> None:
        """`letterbox`: keep the picture's display shape (its pixels' shape being the stream's
        `sample_aspect`, square when unknown), scaled to fit and centred on black, instead of
        stretching it to the output."""
        self.width, self.height, self.letterbox = width, height, letterbox
        self.sample_aspect = sample_aspect
        self._reformatter = VideoReformatter()

    def __call__(self, frame: av.VideoFrame) -> np.ndarray:
        width, height = self.fit(frame) if self.letterbox else (self.width, self.height)
        scaled = self._reformatter.reformat(
            frame,
            width=width,
            height=height,
            format="rgb24",
            interpolation=INTERPOLATION,
            threads=1,  # the decoder's threads already use every core; slices only add overhead
        ).to_ndarray()
        if (width, height) == (self.width, self.height):
            return scaled
        out = np.zeros((self.height, self.width, 3), np.uint8)
        top, left = (self.height - height) // 2, (self.width - width) // 2
        out[top : top + height, left : left + width] = scaled
        return out

    def fit(self, frame: av.VideoFrame) -> tuple[int, int]:
        """The largest (width, height) of the frame's display shape inside the output."""
        sar = self.sample_aspect
        aspect = frame.width / frame.height * (float(sar) if sar else 1.0)
        if aspect >= self.width / self.height:
            return self.width, max(1, min(self.height, round(self.width / aspect)))
        return max(1, min(self.width, round(self.height * aspect))), self.height


def rgb_as_decoded(rgb: np.ndarray, scaler: FrameScaler) -> np.ndarray:
    """A rendered RGB image as the decoder would hand it to the model (yuv420p round trip)."""
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    even = frame.reformat(
        width=frame.width - frame.width % 2,
        height=frame.height - frame.height % 2,
        format="yuv420p",
    )
    return scaler(even)
