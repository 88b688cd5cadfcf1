"""The backdrop of a shot: a room (wall and a floor in perspective), a frontal wall, a surface
seen from above, or an outdoor view, with furniture-like rectangles; drawn on a canvas that
covers everything the camera will show.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.sim.sprites.textures import RGB, Look, painted, pattern, random_rgb

LAYOUTS = ("room", "wall", "top", "outdoor")
_LAYOUT_P = (0.45, 0.2, 0.15, 0.2)


@dataclass(eq=False)
class Stage:
    canvas: np.ndarray  # (Hc, Wc, 3) float32, raw colours (the look is applied when finished)
    origin: tuple[float, float]  # scene coordinates of canvas pixel (0, 0)
    size: tuple[int, int]  # picture (w, h)
    layout: str
    horizon: float | None  # scene y where a floor (or the ground) begins, if one is seen
    look: Look
    # Oscillations stay below fps / 6 so every turn-round spans several frames (a sinusoid
    # turning within one frame interval looks like an impact).
    fps: float = 30.0

    def max_hz(self, hz: float) -> float:
        return min(hz, self.fps / 6)

    def to_canvas(self, pts: np.ndarray) -> np.ndarray:
        return np.asarray(pts, np.float64) - np.asarray(self.origin)

    def colour_at(self, x: float, y: float, r: float = 4.0) -> RGB:
        """Mean raw colour of the canvas around scene point (x, y)."""
        cx, cy = self.to_canvas([x, y])
        h, w = self.canvas.shape[:2]
        x0, x1 = int(np.clip(cx - r, 0, w - 1)), int(np.clip(cx + r + 1, 1, w))
        y0, y1 = int(np.clip(cy - r, 0, h - 1)), int(np.clip(cy + r + 1, 1, h))
        m = self.canvas[y0:y1, x0:x1].reshape(-1, 3).mean(axis=0)
        return (float(m[0]), float(m[1]), float(m[2]))

    def fill(self, pts: np.ndarray, colour: RGB | np.ndarray, shade: float = 0.0) -> None:
        """Fill a scene polygon with a flat colour or an image of the canvas' size, with a
        vertical shading ramp of relative strength `shade`."""
        mask = np.zeros(self.canvas.shape[:2], np.uint8)
        cv2.fillPoly(mask, [np.round(self.to_canvas(pts) * 16).astype(np.int32)], 255, 16, 4)
        ys, xs = np.nonzero(mask)
        if len(ys) == 0:
            return
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        a = mask[y0:y1, x0:x1, None].astype(np.float32) / 255.0
        if isinstance(colour, np.ndarray):
            src = colour[y0:y1, x0:x1]
        else:
            src = np.broadcast_to(np.asarray(colour, np.float32), (*a.shape[:2], 3))
        ramp = 1.0 + shade * (np.linspace(-0.5, 0.5, y1 - y0, dtype=np.float32)[:, None, None])
        roi = self.canvas[y0:y1, x0:x1]
        roi[:] = roi * (1 - a) + src * ramp * a

    def line(self, p0, p1, colour: RGB, width: float) -> None:
        a, b = self.to_canvas([p0, p1]) * 16
        cv2.line(
            self.canvas,
            tuple(int(v) for v in np.round(a)),
            tuple(int(v) for v in np.round(b)),
            colour,
            max(round(width), 1),
            cv2.LINE_AA,
            4,
        )

    def finished(self) -> np.ndarray:
        return self.look.apply(self.canvas)


def build_stage(
    rng: np.random.Generator, size: tuple[int, int], bounds: tuple[float, ...], look: Look
) -> Stage:
    """A backdrop covering the scene box `bounds` (x0, y0, x1, y1) for a picture of `size`."""
    x0, y0, x1, y1 = bounds
    origin = (float(np.floor(x0)) - 2, float(np.floor(y0)) - 2)
    wc, hc = int(np.ceil(x1 - origin[0])) + 3, int(np.ceil(y1 - origin[1])) + 3
    layout = str(rng.choice(LAYOUTS, p=_LAYOUT_P))
    stage = Stage(painted(rng, hc, wc), origin, size, layout, None, look)
    _w, h = size
    if layout in ("room", "outdoor"):
        stage.horizon = float(rng.uniform(0.25, 0.7) * h)
    if layout == "outdoor":
        sky = random_rgb(rng, 0.5, 1.0)
        stage.fill(_band(stage, y0 - 5, stage.horizon), painted(rng, hc, wc, sky))
        _hills(rng, stage)
    if layout in ("room", "wall"):
        for _ in range(int(rng.integers(0, 5))):
            _furniture(rng, stage, bottom=stage.horizon)
    if stage.horizon is not None:
        _floor(rng, stage)
    return stage


def _band(stage: Stage, top: float, bottom: float) -> np.ndarray:
    x0 = stage.origin[0] - 5
    x1 = x0 + stage.canvas.shape[1] + 10
    return np.array([[x0, top], [x1, top], [x1, bottom], [x0, bottom]])


def _floor(rng: np.random.Generator, stage: Stage) -> None:
    """A textured plane from the horizon line down, foreshortened toward the horizon."""
    hc, wc = stage.canvas.shape[:2]
    tex_h, tex_w = 256, 256
    tex = painted(rng, tex_h, tex_w)
    if rng.random() < 0.5:
        tex = (
            tex * (0.8 + 0.4 * pattern(rng, tex_h, tex_w, ("checker", "wood", "bricks")))[..., None]
        )
    top = float(stage.horizon) - stage.origin[1]
    spread = rng.uniform(1.5, 5.0)
    skew = rng.uniform(-0.3, 0.3) * wc
    src = np.float32([[0, 0], [tex_w, 0], [tex_w, tex_h], [0, tex_h]])
    near = wc * spread
    dst = np.float32(
        [[0, top], [wc, top], [wc / 2 + near / 2 + skew, hc], [wc / 2 - near / 2 + skew, hc]]
    )
    hmat = cv2.getPerspectiveTransform(src, dst)
    floor = cv2.warpPerspective(tex, hmat, (wc, hc), flags=cv2.INTER_LINEAR)
    floor *= np.clip(np.linspace(0.85, 1.15, hc, dtype=np.float32), 0, 2)[:, None, None]
    stage.fill(_band(stage, stage.horizon, stage.origin[1] + hc + 5), floor)
    if rng.random() < 0.5:  # skirting board / horizon line
        edge = random_rgb(rng)
        a, b = _band(stage, stage.horizon, stage.horizon)[[0, 1]]
        stage.line(a, b, edge, rng.uniform(1, 4))


def _furniture(rng: np.random.Generator, stage: Stage, bottom: float | None) -> None:
    """A door, frame, cabinet or window: a rectangle with a pattern, shading and an outline."""
    w, h = stage.size
    rw, rh = rng.uniform(0.08, 0.5) * w, rng.uniform(0.1, 0.8) * h
    x = rng.uniform(-0.2 * w, 1.1 * w)
    yb = bottom if bottom is not None and rng.random() < 0.6 else rng.uniform(0.3, 1.1) * h
    rect = np.array([[x, yb - rh], [x + rw, yb - rh], [x + rw, yb], [x, yb]])
    hc, wc = stage.canvas.shape[:2]
    stage.fill(rect, painted(rng, hc, wc), shade=rng.uniform(-0.4, 0.4))
    if rng.random() < 0.7:
        edge = random_rgb(rng)
        for i in range(4):
            stage.line(rect[i], rect[(i + 1) % 4], edge, rng.uniform(1, 3))


def _hills(rng: np.random.Generator, stage: Stage) -> None:
    w = stage.canvas.shape[1]
    xs = np.linspace(stage.origin[0], stage.origin[0] + w, 24)
    height = rng.uniform(5, 0.3 * stage.size[1]) * (0.4 + np.cumsum(rng.normal(0, 0.25, 24)))
    base = float(stage.horizon)
    pts = np.concatenate(
        [np.stack([xs, base - np.abs(height)], 1), [[xs[-1], base], [xs[0], base]]]
    )
    stage.fill(pts, random_rgb(rng, 0.1, 0.6), shade=rng.uniform(-0.3, 0.3))
