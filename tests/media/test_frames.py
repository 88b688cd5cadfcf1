"""Model pixels: a letterboxed frame keeps the picture's shape, centred on black."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest

from service.media.frames import FrameScaler


def _frame(width: int, height: int) -> av.VideoFrame:
    frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), 200, np.uint8), format="rgb24")
    return frame.reformat(format="yuv420p")


@pytest.mark.parametrize(
    ("size", "sar", "inner"),
    [
        ((1280, 720), None, (192, 108)),  # 16:9 fills the frame
        ((640, 480), None, (144, 108)),  # 4:3: bars left and right
        ((720, 720), None, (108, 108)),
        ((1920, 800), None, (192, 80)),  # scope: bars above and below
        ((720, 576), (64, 45), (192, 108)),  # anamorphic PAL widescreen: 16:9 on display
    ],
)
def test_letterbox_keeps_the_display_shape(
    size: tuple[int, int], sar: tuple[int, int] | None, inner: tuple[int, int]
) -> None:
    scaler = FrameScaler(192, 108, letterbox=True, sample_aspect=sar and Fraction(*sar))
    rgb = scaler(_frame(*size))
    assert rgb.shape == (108, 192, 3)
    lit = rgb.max(axis=-1) > 100
    rows, cols = np.flatnonzero(lit.any(axis=1)), np.flatnonzero(lit.any(axis=0))
    assert (cols[-1] - cols[0] + 1, rows[-1] - rows[0] + 1) == inner
    assert abs(cols[0] - (192 - cols[-1] - 1)) <= 1 and abs(rows[0] - (108 - rows[-1] - 1)) <= 1


def test_without_letterbox_the_picture_is_stretched() -> None:
    rgb = FrameScaler(192, 108)(_frame(640, 480))
    assert (rgb.max(axis=-1) > 100).all()
