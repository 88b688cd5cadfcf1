"""Shot cuts: where the picture jumps to another scene, so no motion continues across it.

A cut is a frame where the picture's colours and its layout together change more than a camera
or an object can change them between two frames: the change of the colour histogram over
HISTOGRAM_JUMP plus that of a grey thumbnail over THUMBNAIL_JUMP exceeds 1. A camera that pans
or dollies keeps the scene's colours and moves the thumbnail little between two frames; an
object that moves changes few pixels. The classic pair of cues of shot-boundary detection,
cheap enough to run on every frame. On simulated scenes filmed by a moving camera (15
degrees/s, 24 fps) the score stays under 0.2, on the real footage in engines/eval/footage under
0.35 away from its one cut; across cuts between simulated scenes it is 1.3 or more.

A shot lasts longer than MIN_SHOT_S: a large object tumbling close to the camera changes most
of the picture frame after frame, and read as cuts it would end every track at each one. So no
second cut is called within MIN_SHOT_S of the last (the first change of such a run still is).

One CutDetector per stream; not thread-safe.
"""

from __future__ import annotations

import numpy as np

BITS = 2  # per channel: 4 levels, 64 colour bins
BINS = 1 << BITS
SHIFT = 8 - BITS
HISTOGRAM_JUMP = 0.15  # total variation distance between consecutive frames' histograms
THUMBNAIL_JUMP = 0.1  # mean absolute difference of 16x9 grey thumbnails, in [0, 1]
THUMBNAIL = (9, 16)
MIN_SHOT_S = 0.25


def histogram(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> (BINS**3,) colour histogram summing to 1."""
    q = rgb >> SHIFT  # in uint8 throughout: this runs on every live frame
    index = (q[..., 0] << (2 * BITS)) | (q[..., 1] << BITS) | q[..., 2]
    counts = np.bincount(index.reshape(-1), minlength=BINS**3).astype(np.float64)
    return counts / float(counts.sum())


def thumbnail(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> THUMBNAIL grey picture in [0, 1], by block means."""
    h, w, _ = rgb.shape
    (n, m), area = THUMBNAIL, 3 * 255.0
    if h % n == 0 and w % m == 0:  # the tiers' pictures: whole blocks, one reshape
        sums = rgb.reshape(n, h // n, m, w // m, 3).sum(axis=(1, 3, 4), dtype=np.int64)
        means: np.ndarray = sums / (area * (h // n) * (w // m))
        return means
    grey = rgb.sum(axis=-1, dtype=np.int64)
    rows = np.linspace(0, h, n + 1).astype(int)
    cols = np.linspace(0, w, m + 1).astype(int)
    blocks = np.add.reduceat(np.add.reduceat(grey, rows[:-1], axis=0), cols[:-1], axis=1)
    return blocks / (area * np.diff(rows)[:, None] * np.diff(cols)[None, :])


class CutDetector:
    def __init__(self) -> None:
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._last_cut_s = -np.inf

    def push(self, rgb: np.ndarray, time_s: float) -> bool:
        """Whether this frame (H, W, 3) uint8 at `time_s` starts a new shot (never the first
        frame)."""
        now = (histogram(rgb), thumbnail(rgb))
        last, self._last = self._last, now
        if last is None:
            return False
        colours = 0.5 * float(np.abs(now[0] - last[0]).sum())
        layout = float(np.abs(now[1] - last[1]).mean())
        if colours / HISTOGRAM_JUMP + layout / THUMBNAIL_JUMP <= 1.0:
            return False
        if time_s - self._last_cut_s < MIN_SHOT_S:
            return False
        self._last_cut_s = time_s
        return True
