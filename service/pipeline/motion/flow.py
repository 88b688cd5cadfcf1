"""Motion of a stream, per frame interval: dense optical flow with the camera's motion removed.

    MotionField(width, height).push(time_s, rgb) -> Interval | None

Frames come at their own times, letterboxed into the tier's picture (width x height, bars
exactly black). Each frame after the first gives the interval from the frame before it:

    flow        (2, h, w) float32  the residual motion (x, y), as a velocity: picture pixels per
                                   1/30 s, whatever the interval, so one contact looks the same
                                   at 12 and 60 fps; mean over each FACTOR x FACTOR block
    speed_max   (h, w)             the fastest residual pixel of each block (a thin stick moves
                                   within a block that is mostly still)
    warp_error  (h, w)             |frame - the previous frame warped by the flow|, grey in [0, 1]:
                                   where flow fails (blur streaks, occlusion, a body that deforms)
    change      (h, w)             |frame - the previous frame moved as the camera moved|, grey in
                                   [0, 1]: what moved, however far (DIS loses a body that moves
                                   further than its own size in one interval: a fast stick)
    grey        (h, w)             the later frame's grey, in [0, 1], minus its mean
    dt_s        float              the interval's length

with h, w = height // FACTOR, width // FACTOR. Flow is OpenCV's DIS (a maintained, CPU-fast
dense flow) on the grey picture. The camera's motion is a similarity (shift, zoom, roll) fitted
robustly (least median of squares) to the flow on a grid inside the picture and subtracted, so a
pan or a shaking hand leaves the scene still and only things that move against it remain.

A shot cut (the caller says which frame starts a new shot) has no interval: the first frame of
the shot starts over. `push` is `measure(pair(...))`: `pair` keeps the stream's state and is
cheap, `measure` is pure and takes the time, so several pairs may be measured at once in
threads. Deterministic; one per stream; not thread-safe.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import cv2
import numpy as np

from service.pipeline.contacts.picture import PictureBox

FACTOR = 4  # the head reads the motion at a quarter of the picture's size
VELOCITY_DT_S = 1 / 30  # flow is reported as pixels per this long
GRID_STEP = 12  # px between the points the camera's motion is fitted on
MIN_CAMERA_POINTS = 12
# DIS's ULTRAFAST preset refined down to half the picture's scale (its own stops at a quarter,
# where a body of a few pixels is lost): about a millisecond at 320x180. Like every
# coarse-to-fine flow it loses a small body that moves further than its own size in one
# interval; `change` shows those.
PRESET = cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST
FINEST_SCALE = 1


@dataclass(frozen=True)
class Pair:
    """Two frames of one shot, grey, and the grid inside the picture the camera is fitted on."""

    start_s: float
    before: np.ndarray
    end_s: float
    after: np.ndarray
    grid: np.ndarray


@dataclass(frozen=True)
class Interval:
    """The motion between two frames of one shot (see the module docstring for the maps)."""

    start_s: float
    end_s: float
    flow: np.ndarray
    speed_max: np.ndarray
    warp_error: np.ndarray
    change: np.ndarray
    grey: np.ndarray
    camera: np.ndarray  # (2, 3) the similarity the camera moved by, picture pixels

    @property
    def dt_s(self) -> float:
        return self.end_s - self.start_s


def grey_of(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> (H, W) uint8 grey, as the flow reads it."""
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def blocks(x: np.ndarray, factor: int, how: str = "mean") -> np.ndarray:
    """(H, W) or (C, H, W) float32 -> (..., H // factor, W // factor), the mean or the max of
    each block (edge rows and columns that make no whole block are left out). OpenCV's area
    resize and dilation: numpy's reductions over a reshaped block take several times longer."""
    if x.ndim == 3:
        return np.stack([blocks(c, factor, how) for c in x])
    h, w = x.shape[0] // factor, x.shape[1] // factor
    x = np.ascontiguousarray(x[: h * factor, : w * factor], dtype=np.float32)
    if how == "max":
        grown = cv2.dilate(x, np.ones((factor, factor), np.uint8), anchor=(0, 0))
        return grown[::factor, ::factor]
    return cv2.resize(x, (w, h), interpolation=cv2.INTER_AREA)


def picture_grid(bounds: tuple[int, int, int, int], step: int = GRID_STEP) -> np.ndarray:
    """(P, 2) float32 points x, y every `step` px inside (left, top, right, bottom), a margin
    of half a step from its edges (flow is least sure where the picture ends)."""
    left, top, right, bottom = bounds
    xs = np.arange(left + step / 2, right - step / 2 + 1e-6, step)
    ys = np.arange(top + step / 2, bottom - step / 2 + 1e-6, step)
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)


def camera_motion(flow: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The similarity (2, 3) that best explains `flow` (H, W, 2) at the grid's points, robust to
    the moving things in front of the camera (LMedS tolerates up to half of the points moving
    otherwise). Identity when it cannot be fitted."""
    if len(grid) < MIN_CAMERA_POINTS:
        return np.eye(2, 3, dtype=np.float32)
    xi, yi = grid[:, 0].astype(int), grid[:, 1].astype(int)
    moved = grid + flow[yi, xi]
    matrix, _ = cv2.estimateAffinePartial2D(grid, moved, method=cv2.LMEDS)
    return np.eye(2, 3, dtype=np.float32) if matrix is None else matrix.astype(np.float32)


def camera_flow_at(matrix: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    a = matrix
    fx = (a[0, 0] - 1) * xs + a[0, 1] * ys + a[0, 2]
    fy = a[1, 0] * xs + (a[1, 1] - 1) * ys + a[1, 2]
    return np.stack([fx, fy], axis=-1)


class MotionField:
    """One stream's motion: `push` each frame in time order; every frame after a shot's first
    gives an Interval."""

    def __init__(self, width: int, height: int) -> None:
        if width % FACTOR or height % FACTOR:
            raise ValueError(f"picture {width}x{height} is not whole blocks of {FACTOR}")
        self.width, self.height = width, height
        self._last: tuple[float, np.ndarray] | None = None
        self._picture = PictureBox()
        self._bounds: tuple[int, int, int, int] | None = None
        self._grid = np.zeros((0, 2), np.float32)

    def push(self, time_s: float, rgb: np.ndarray, *, cut: bool = False) -> Interval | None:
        """`rgb` (height, width, 3) uint8 at `time_s`; `cut`: it starts a new shot."""
        pair = self.pair(time_s, rgb, cut=cut)
        return None if pair is None else measure(pair)

    def pair(self, time_s: float, rgb: np.ndarray, *, cut: bool = False) -> Pair | None:
        """The frame with the one before it, to `measure`; None for a shot's first frame."""
        if rgb.shape != (self.height, self.width, 3):
            raise ValueError(f"frame {rgb.shape} is not the picture's {self.height}x{self.width}")
        grey = grey_of(rgb)
        last, self._last = self._last, (time_s, grey)
        self._widen(rgb)
        if last is None or cut:
            return None
        if time_s <= last[0]:
            raise ValueError("frames must come in increasing time order")
        return Pair(last[0], last[1], time_s, grey, self._grid)

    def _widen(self, rgb: np.ndarray) -> None:
        """The camera is fitted inside the picture: where any frame so far was not black
        (service.pipeline.contacts.picture), the letterbox bars never move."""
        self._picture.push(rgb[None])
        left, top, right, bottom = (int(b) for b in self._picture.bounds)
        bounds = (left, top, right, bottom) if right > left else (0, 0, self.width, self.height)
        if bounds != self._bounds:
            self._bounds, self._grid = bounds, picture_grid(bounds)


def measure(pair: Pair) -> Interval:
    """The motion between a pair's frames (the module docstring's maps). Thread-safe."""
    t0, before, t1, after = pair.start_s, pair.before, pair.end_s, pair.after
    # None: OpenCV allocates the output (its stubs do not allow for that).
    flow = _dis().calc(before, after, None)  # type: ignore[call-overload]
    matrix = camera_motion(flow, pair.grid)
    # The error of the raw flow (the camera's motion is part of what it explains): the
    # later frame pulled back along the flow, against the earlier one.
    xs, ys = _pixels(*before.shape)
    warped = cv2.remap(after, xs + flow[..., 0], ys + flow[..., 1], cv2.INTER_LINEAR)
    error = np.abs(before.astype(np.float32) - warped.astype(np.float32)) / np.float32(255)
    moved = camera_flow_at(matrix, xs, ys)
    followed = cv2.remap(after, xs + moved[..., 0], ys + moved[..., 1], cv2.INTER_LINEAR)
    change = np.abs(before.astype(np.float32) - followed.astype(np.float32)) / np.float32(255)
    residual = flow - moved
    scale = np.float32(VELOCITY_DT_S / (t1 - t0))
    residual = residual.transpose(2, 0, 1) * scale
    speed = np.sqrt(residual[0] ** 2 + residual[1] ** 2)
    grey = blocks(after.astype(np.float32), FACTOR) / np.float32(255)
    return Interval(
        start_s=t0,
        end_s=t1,
        flow=blocks(residual, FACTOR).astype(np.float32),
        speed_max=blocks(speed, FACTOR, "max").astype(np.float32),
        warp_error=blocks(error, FACTOR).astype(np.float32),
        change=blocks(change, FACTOR).astype(np.float32),
        grey=(grey - grey.mean()).astype(np.float32),
        camera=matrix,
    )


_local = threading.local()  # DIS keeps working buffers: one instance per thread


def _dis() -> cv2.DISOpticalFlow:
    dis: cv2.DISOpticalFlow | None = getattr(_local, "dis", None)
    if dis is None:
        dis = cv2.DISOpticalFlow.create(PRESET)
        dis.setFinestScale(FINEST_SCALE)
        _local.dis = dis
    return dis


@functools.cache
def _pixels(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pixel's x and y (read only: shared by every stream and thread)."""
    xs, ys = np.meshgrid(np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32))
    xs.flags.writeable = ys.flags.writeable = False
    return xs, ys
