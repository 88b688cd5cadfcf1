"""Rigid 2-D bodies: the geometry that contact labels are solved on, and the sprite drawn from it.

A `Shape` lives in its own frame (px, x right, y down, the origin is the point its pose places)
and is a union of ellipses and polygons. Labels use `support`, the exact extent of the union in
a direction, so a contact solved on a shape is a contact of the outline that is drawn (up to
the rasteriser's anti-aliasing, half a pixel).

Pixel convention everywhere in this package: pixel centres sit at integer coordinates (as in
OpenCV and optical flow), so pixel (i, j) covers [i - 0.5, i + 0.5] x [j - 0.5, j + 0.5].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

SUPERSAMPLE = 4  # sprites are drawn 4x larger and averaged down: thin sticks stay smooth
_SHIFT = 4  # fixed-point bits for cv2 drawing calls

Ellipse = tuple[float, float, float, float, float]  # cx, cy, semi-axis a, semi-axis b, angle rad


@dataclass(frozen=True)
class Shape:
    ellipses: tuple[Ellipse, ...] = ()
    polygons: tuple[np.ndarray, ...] = ()  # each (K, 2) float64 vertices

    def support(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Extent of the body along unit directions d (T, 2) and the point reaching it (T, 2):
        max over body points p of p . d."""
        d = np.atleast_2d(d)
        best = np.full(len(d), -np.inf)
        point = np.zeros((len(d), 2))
        for cx, cy, a, b, ang in self.ellipses:
            u = np.array([np.cos(ang), np.sin(ang)])
            v = np.array([-u[1], u[0]])
            du, dv = d @ u, d @ v
            k = np.maximum(np.hypot(a * du, b * dv), 1e-12)
            ext = cx * d[:, 0] + cy * d[:, 1] + k
            pts = np.array([cx, cy]) + (
                (a * a * du / k)[:, None] * u + (b * b * dv / k)[:, None] * v
            )
            better = ext > best
            best = np.where(better, ext, best)
            point[better] = pts[better]
        for poly in self.polygons:
            proj = d @ poly.T
            i = np.argmax(proj, axis=1)
            ext = proj[np.arange(len(d)), i]
            better = ext > best
            best = np.where(better, ext, best)
            point[better] = poly[i[better]]
        return best, point

    def contains(self, p: np.ndarray) -> np.ndarray:
        """Which points (P, 2), in the body frame, lie inside the body."""
        p = np.atleast_2d(p)
        inside = np.zeros(len(p), bool)
        for cx, cy, a, b, ang in self.ellipses:
            c, s = np.cos(ang), np.sin(ang)
            x, y = p[:, 0] - cx, p[:, 1] - cy
            inside |= ((x * c + y * s) / a) ** 2 + ((-x * s + y * c) / b) ** 2 <= 1.0
        for poly in self.polygons:
            x0, y0 = poly[:, 0], poly[:, 1]
            x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
            px, py = p[:, 0:1], p[:, 1:2]
            crosses = (y0 > py) != (y1 > py)
            with np.errstate(divide="ignore", invalid="ignore"):
                xs = x0 + (py - y0) * (x1 - x0) / (y1 - y0)
            inside |= np.sum(crosses & (px < xs), axis=1) % 2 == 1
        return inside

    def bounds(self) -> tuple[float, float, float, float]:
        """Axis-aligned box (x0, y0, x1, y1) of the body in its own frame."""
        dirs = np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 0.0], [0.0, 1.0]])
        ext, _ = self.support(dirs)
        return (-ext[0], -ext[1], ext[2], ext[3])

    @property
    def size(self) -> float:
        """Longest extent (the largest width over 90 directions), px."""
        ang = np.linspace(0, np.pi, 90, endpoint=False)
        d = np.stack([np.cos(ang), np.sin(ang)], axis=1)
        return float(np.max(self.support(d)[0] + self.support(-d)[0]))


def union(*shapes: Shape) -> Shape:
    return Shape(
        tuple(e for s in shapes for e in s.ellipses), tuple(p for s in shapes for p in s.polygons)
    )


def ellipse(cx: float, cy: float, a: float, b: float, angle: float = 0.0) -> Shape:
    return Shape(ellipses=((cx, cy, max(a, 0.3), max(b, 0.3), angle),))


def polygon(points: np.ndarray) -> Shape:
    return Shape(polygons=(np.asarray(points, np.float64),))


def rounded_rect(x0: float, y0: float, x1: float, y1: float, radius: float = 0.0) -> Shape:
    """A rectangle whose corners are quarter circles of `radius` (8 vertices per corner)."""
    r = min(radius, (x1 - x0) / 2, (y1 - y0) / 2)
    if r < 0.5:
        return polygon(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]]))
    corners = [(x1 - r, y0 + r, -np.pi / 2), (x1 - r, y1 - r, 0.0)]
    corners += [(x0 + r, y1 - r, np.pi / 2), (x0 + r, y0 + r, np.pi)]
    pts = [
        (cx + r * np.cos(a0 + k * np.pi / 14), cy + r * np.sin(a0 + k * np.pi / 14))
        for cx, cy, a0 in corners
        for k in range(8)
    ]
    return polygon(np.array(pts))


@dataclass(frozen=True)
class Paint:
    """How a part is coloured: a base RGB in [0, 1] (display values), a linear shading gradient
    across the part, an optional texture and an outline."""

    rgb: tuple[float, float, float]
    shade: float = 0.0  # relative brightness change across the body
    shade_angle: float = 0.0
    texture: np.ndarray | None = field(default=None, compare=False)  # (h, w) in [0, 2] factor
    outline: float | None = None  # outline brightness factor (0 dark, 2 light), or none


@dataclass(frozen=True)
class Sprite:
    """Premultiplied RGBA float32 (h, w, 4); body point (0, 0) is sprite pixel `origin`."""

    rgba: np.ndarray
    origin: tuple[float, float]


def rasterise(parts: list[tuple[Shape, Paint]]) -> Sprite:
    """Draw the parts in order (later ones on top) with anti-aliased edges."""
    whole = union(*(s for s, _ in parts))
    x0, y0, x1, y1 = whole.bounds()
    ox, oy = np.floor(-x0) + 2.0, np.floor(-y0) + 2.0
    w, h = int(np.ceil(x1 + ox)) + 3, int(np.ceil(y1 + oy)) + 3
    rgb = np.zeros((h, w, 3), np.float32)
    alpha = np.zeros((h, w), np.float32)
    for shape, paint in parts:
        mask = _mask(shape, (ox, oy), (w, h))
        colour = _colour(paint, mask, (w, h))
        a = mask[..., None]
        rgb = rgb * (1 - a) + colour * a
        alpha = alpha + mask * (1 - alpha)
    rgba = np.dstack([rgb * alpha[..., None], alpha]).astype(np.float32)
    return Sprite(rgba, (float(ox), float(oy)))


def _mask(shape: Shape, origin: tuple[float, float], size: tuple[int, int]) -> np.ndarray:
    ss, scale = SUPERSAMPLE, SUPERSAMPLE * (1 << _SHIFT)
    big = np.zeros((size[1] * ss, size[0] * ss), np.uint8)

    def fixed(x: np.ndarray | float, o: float) -> np.ndarray:
        return np.round(((np.asarray(x) + o + 0.5) * ss - 0.5) * (1 << _SHIFT)).astype(np.int32)

    for cx, cy, a, b, ang in shape.ellipses:
        centre = (int(fixed(cx, origin[0])), int(fixed(cy, origin[1])))
        axes = (max(round(a * scale), 1), max(round(b * scale), 1))
        cv2.ellipse(big, centre, axes, np.degrees(ang), 0, 360, 255, -1, cv2.LINE_AA, _SHIFT)
    for poly in shape.polygons:
        pts = np.stack([fixed(poly[:, 0], origin[0]), fixed(poly[:, 1], origin[1])], axis=1)
        cv2.fillPoly(big, [pts], 255, cv2.LINE_AA, _SHIFT)
    small = cv2.resize(big, size, interpolation=cv2.INTER_AREA)
    return small.astype(np.float32) / 255.0


def _colour(paint: Paint, mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    w, h = size
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    ramp = xs * np.cos(paint.shade_angle) + ys * np.sin(paint.shade_angle)
    ramp = (ramp - ramp.min()) / max(float(np.ptp(ramp)), 1.0) - 0.5
    factor = 1.0 + paint.shade * ramp
    if paint.texture is not None:
        tex = cv2.resize(paint.texture.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)
        factor = factor * tex
    if paint.outline is not None:
        core = cv2.erode((mask > 0.5).astype(np.uint8), np.ones((3, 3), np.uint8))
        edge = np.clip(mask - core, 0.0, 1.0)
        factor = factor * (1 + (paint.outline - 1) * edge)
    return np.asarray(paint.rgb, np.float32) * factor[..., None]
