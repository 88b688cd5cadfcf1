"""Where the picture is inside the letterboxed frame, and which objects its edge cuts.

An object partly outside the picture is seen only in part: the localiser places it at the
centre of what shows, and registration matches a disc that the edge crops. As the object moves
across the edge its position bends where its motion does not, which the contact head reads as a
contact. So an object whose disc the edge cuts by more than EDGE_RADII of its radius may not
make a sound: its motion there is not known well enough to say it hit something.

The picture's extent needs no word from the decoder: the letterbox bars are exactly black
(service.media.frames.FrameScaler fills them with zeros), so the picture is wherever any frame
of the stream so far had a pixel that is not. A dark opening widens the box as the picture
brightens; until then the box is smaller, and objects near its edge stay quiet. Deterministic;
one per stream.
"""

from __future__ import annotations

import numpy as np

EDGE_RADII = 0.5  # how far inside the edge an object's centre must be, in its radii


class PictureBox:
    def __init__(self) -> None:
        self.rows: np.ndarray | None = None  # (H,) bool: rows with picture in them
        self.cols: np.ndarray | None = None  # (W,) bool
        # (left, top, right, bottom): the picture's outer edges in model pixels from the frame's
        # top-left corner (the localiser's coordinates: column c spans [c, c + 1]); kept with
        # rows and cols, since `cuts` asks for every interval decided. Nothing seen: no picture.
        self.bounds: tuple[float, float, float, float] = (0.0, 0.0, -1.0, -1.0)

    def push(self, rgb: np.ndarray) -> None:
        """Frames (N, H, W, 3) uint8 as the localiser gets them."""
        if self.rows is not None and self.cols is not None and self.rows.all() and self.cols.all():
            return  # the whole frame is picture: nothing can widen it
        _, h, w, c = rgb.shape
        # Reduced over the long contiguous axes first: numpy is slow along the 3 channels.
        brightest = rgb.max(axis=0).reshape(h, w * c)
        rows = brightest.max(axis=1) > 0
        cols = brightest.max(axis=0).reshape(w, c).max(axis=1) > 0
        if self.rows is not None and self.cols is not None:
            rows, cols = self.rows | rows, self.cols | cols
        self.rows, self.cols = rows, cols
        if rows.any() and cols.any():
            r, k = np.flatnonzero(rows), np.flatnonzero(cols)
            self.bounds = (float(k[0]), float(r[0]), k[-1] + 1.0, r[-1] + 1.0)

    def cuts(self, xy: np.ndarray, radius: np.ndarray) -> bool:
        """Whether the edge cuts any of these sightings (N, 2) px of radius (N,) px by more than
        EDGE_RADII of the radius; rows that are NaN (not seen) do not count."""
        seen = np.isfinite(xy).all(axis=1)
        if not seen.any():
            return False
        xy, margin = xy[seen], EDGE_RADII * np.asarray(radius, np.float64)[seen]
        left, top, right, bottom = self.bounds
        x, y = xy[:, 0], xy[:, 1]
        across = (x - margin < left) | (x + margin > right)
        return bool(np.any(across | (y - margin < top) | (y + margin > bottom)))
