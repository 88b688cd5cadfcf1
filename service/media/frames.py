"""The one place a video frame becomes model input pixels.

Training data goes through this same function (engines render RGB, convert to yuv420p like a
real decode, then call `to_model_rgb`), so the model sees the same scaler and chroma handling at
training and at serving time.
"""

from __future__ import annotations

import av
import numpy as np

# AREA averages all source pixels of an output pixel: no aliasing when shrinking 1280x720 to
# 64x64, where bilinear would sample a few pixels and flicker on fine texture.
INTERPOLATION = "AREA"


def to_model_rgb(frame: av.VideoFrame, width: int, height: int) -> np.ndarray:
    """Decoded frame (any size, any pixel format) -> (height, width, 3) uint8 RGB."""
    return frame.to_ndarray(width=width, height=height, format="rgb24", interpolation=INTERPOLATION)


def rgb_as_decoded(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """A rendered RGB image as the decoder would hand it to the model (yuv420p round trip)."""
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    even = frame.reformat(
        width=frame.width - frame.width % 2,
        height=frame.height - frame.height % 2,
        format="yuv420p",
    )
    return to_model_rgb(even, width, height)
