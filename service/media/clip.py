"""A small synthetic video (a ball bouncing on a floor), for timing a tier where no clip is at
hand (`foley tiers`): H.264 in MP4, 30 fps."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

FPS = 30


def write_test_clip(path: Path, seconds: float, size: tuple[int, int]) -> Path:
    width, height = size
    rng = np.random.default_rng(0)
    floor = (rng.integers(90, 140, (height, width, 3))).astype(np.uint8)
    ys, xs = np.mgrid[0:height, 0:width]
    radius = height / 12
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(FPS))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(round(seconds * FPS)):
            t = k / FPS
            phase = (t % 1.0) * 2 - 1  # one bounce a second
            cy = height * 0.85 - radius - (1 - phase * phase) * height * 0.6
            cx = width * (0.2 + 0.6 * (t / seconds))
            frame = floor.copy()
            frame[(xs - cx) ** 2 + (ys - cy) ** 2 <= radius**2] = (200, 60, 40)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path
