"""Motions given in closed form: a pose for any time, evaluated for whole arrays of times.

A pose is a row (x, y, theta, sx, alpha): the body origin in scene px, its rotation (rad,
x toward y), a stretch along its own x axis (limbs) and an opacity (shadows). Every `Motion`
maps times (T,) to poses (T, 5).

`Track` is one scalar moving between knots with a chosen easing per segment. The easings say
how a motion starts and ends, which is what the contact detector must learn:
    hold    stays put
    lin     constant velocity
    smooth  (1 - cos pi u) / 2: starts and ends at rest, a turn-around spread over many frames
    accel   u**p: starts at rest and ends at full speed (an impact: stopped by the next segment)
    decel   1 - (1 - u)**p: starts at full speed (a rebound) and comes to rest
    bump    linear plus a hump of height h: u**p (1 - u) scaled to peak 1 (a hop or a step arc
            that lands at speed)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engines.sim.sprites.shapes import Shape

X, Y, TH, SX, AL = range(5)
_EASES = ("hold", "lin", "smooth", "accel", "decel", "bump")


class Motion(Protocol):
    def pose(self, t: np.ndarray) -> np.ndarray: ...


def poses(x, y, th=0.0, sx=1.0, alpha=1.0) -> np.ndarray:
    """Stack pose channels (scalars broadcast) into (T, 5)."""
    cols = np.broadcast_arrays(*(np.asarray(c, np.float64) for c in (x, y, th, sx, alpha)))
    return np.stack(cols, axis=-1).reshape(-1, 5)


def rot(th: np.ndarray | float) -> np.ndarray:
    """Rotation matrices (..., 2, 2) for angles th."""
    c, s = np.cos(th), np.sin(th)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


class Track:
    """A scalar through knots: `Track(t0, v0).to(t1, v1, "accel", p=2).hold(t2)...`."""

    def __init__(self, t0: float, v0: float) -> None:
        self._t, self._v = [float(t0)], [float(v0)]
        self._kind: list[int] = []
        self._p: list[float] = []
        self._h: list[float] = []
        self._frozen: tuple[np.ndarray, ...] | None = None

    @property
    def constant(self) -> bool:
        return len(set(self._v)) == 1 and not any(self._h)

    @property
    def end(self) -> tuple[float, float]:
        return self._t[-1], self._v[-1]

    def to(self, t: float, v: float, ease: str = "smooth", p: float = 2.0, h: float = 0.0) -> Track:
        assert t > self._t[-1], f"knots must increase: {t} after {self._t[-1]}"
        self._t.append(float(t))
        self._v.append(float(v))
        self._kind.append(_EASES.index(ease))
        self._p.append(float(p))
        self._h.append(float(h))
        self._frozen = None
        return self

    def hold(self, t: float) -> Track:
        return self.to(t, self._v[-1], "hold") if t > self._t[-1] else self

    def zero_spans(self) -> list[tuple[float, float, bool]]:
        """Where the value rests at 0: (start, end, landed) spans, start -inf when it starts
        there and end inf when it stays; `landed` when it arrived at speed (accel or bump)."""
        spans = []
        start, landed = (-np.inf, False) if self._v[0] == 0 else (None, False)
        for i, kind in enumerate(self._kind):
            if start is not None and kind != 0:  # leaves 0 (or moves on) at this knot
                spans.append((start, self._t[i], landed))
                start = None
            if start is None and self._v[i + 1] == 0 and kind != 0:
                start, landed = self._t[i + 1], kind in (3, 5)
        if start is not None:
            spans.append((start, np.inf, landed))
        return spans

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.float64)
        if not self._kind:
            return np.full(t.shape, self._v[0])
        if self._frozen is None:
            self._frozen = tuple(np.asarray(a) for a in (self._t, self._v, self._kind, self._p))
            self._frozen += (np.asarray(self._h),)
        tk, vk, kind, p, h = self._frozen
        i = np.clip(np.searchsorted(tk, t, side="right") - 1, 0, len(kind) - 1)
        u = np.clip((t - tk[i]) / (tk[i + 1] - tk[i]), 0.0, 1.0)
        k, pi = kind[i], p[i]
        f = np.select(
            [k == 0, k == 1, k == 2, k == 3, k == 4],
            [np.zeros_like(u), u, 0.5 - 0.5 * np.cos(np.pi * u), u**pi, 1 - (1 - u) ** pi],
            default=u,
        )
        peak = (pi / (pi + 1)) ** pi / (pi + 1)
        hump = np.where(k == 5, h[i] * u**pi * (1 - u) / peak, 0.0)
        out = vk[i] + (vk[i + 1] - vk[i]) * f + hump
        return np.where(t < tk[0], vk[0], out)


@dataclass(frozen=True)
class Still:
    x: float
    y: float
    th: float = 0.0
    alpha: float = 1.0

    def pose(self, t: np.ndarray) -> np.ndarray:
        return poses(np.full(np.shape(t), self.x), self.y, self.th, 1.0, self.alpha)


@dataclass(frozen=True)
class Linear:
    """Constant velocity and spin from (x0, y0, th0) at t = 0."""

    x0: float
    y0: float
    vx: float
    vy: float
    th0: float = 0.0
    spin: float = 0.0

    def pose(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.float64)
        return poses(self.x0 + self.vx * t, self.y0 + self.vy * t, self.th0 + self.spin * t)


@dataclass(frozen=True)
class Wave:
    """A base motion plus sums of sinusoids on x, y and theta: (amp, hz, phase) triples."""

    base: Motion
    dx: tuple[tuple[float, float, float], ...] = ()
    dy: tuple[tuple[float, float, float], ...] = ()
    dth: tuple[tuple[float, float, float], ...] = ()

    def pose(self, t: np.ndarray) -> np.ndarray:
        out = self.base.pose(t).copy()
        for col, terms in ((X, self.dx), (Y, self.dy), (TH, self.dth)):
            for amp, hz, ph in terms:
                out[:, col] += amp * np.sin(2 * np.pi * hz * np.asarray(t) + ph)
        return out


@dataclass(frozen=True)
class Pivot:
    """A body turning about its origin (a wrist, a hip) while the origin moves: tracks for the
    origin's x, y and the angle."""

    x: Track
    y: Track
    th: Track

    def pose(self, t: np.ndarray) -> np.ndarray:
        return poses(self.x(t), self.y(t), self.th(t))


@dataclass(frozen=True)
class OnLine:
    """A body placed by its gap to a line: the body's nearest point is `gap(t)` px from the line
    through `p` with unit normal `n` (pointing to the body's side); `s(t)` is the origin's
    coordinate along the line's tangent (n rotated by -90 degrees). A gap that reaches 0 is a
    contact at exactly that knot."""

    p: tuple[float, float]
    n: tuple[float, float]
    shape: Shape
    s: Track
    gap: Track
    th: Track

    def pose(self, t: np.ndarray) -> np.ndarray:
        th = self.th(t)
        n = np.asarray(self.n)
        tangent = np.array([n[1], -n[0]])
        d_body = np.einsum("tji,j->ti", rot(th), -n)  # R(th)^T (-n): the direction in the body
        h, _ = self.shape.support(d_body)
        centre = np.asarray(self.p) + self.s(t)[:, None] * tangent + (self.gap(t) + h)[:, None] * n
        return poses(centre[:, 0], centre[:, 1], th)


@dataclass(frozen=True)
class Limb:
    """A stick sprite of rest length `length` stretched from point a(t) to point b(t)."""

    a: Callable[[np.ndarray], np.ndarray]
    b: Callable[[np.ndarray], np.ndarray]
    length: float

    def pose(self, t: np.ndarray) -> np.ndarray:
        a, b = self.a(t), self.b(t)
        d = b - a
        return poses(a[:, 0], a[:, 1], np.arctan2(d[:, 1], d[:, 0]), np.hypot(*d.T) / self.length)


def anchor(motion: Motion, offset: tuple[float, float]) -> Callable[[np.ndarray], np.ndarray]:
    """A point fixed to a moving body, in scene px: (T,) times -> (T, 2)."""
    off = np.asarray(offset, np.float64)

    def at(t: np.ndarray) -> np.ndarray:
        p = motion.pose(t)
        return p[:, :2] + np.einsum("tij,j->ti", rot(p[:, TH]), off)

    return at


@dataclass(frozen=True)
class Attached:
    """A part carried by a parent body (a wing, a head, a mouth): its origin sits at `offset` in
    the parent's frame, turned by th0 plus sinusoids; `stretch` sinusoids scale its x axis."""

    parent: Motion
    offset: tuple[float, float]
    th0: float = 0.0
    swing: tuple[tuple[float, float, float], ...] = ()
    stretch: tuple[tuple[float, float, float], ...] = ()

    def pose(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.float64)
        p = self.parent.pose(t)
        at = p[:, :2] + np.einsum("tij,j->ti", rot(p[:, TH]), np.asarray(self.offset))
        th = (
            p[:, TH] + self.th0 + sum(a * np.sin(2 * np.pi * f * t + ph) for a, f, ph in self.swing)
        )
        sx = 1.0 + sum(a * np.sin(2 * np.pi * f * t + ph) for a, f, ph in self.stretch)
        return poses(at[:, 0], at[:, 1], th, np.maximum(sx, 0.1))


@dataclass(frozen=True)
class Shadow:
    """A soft shadow on the line y = floor_y(x), under a body: darker and tighter when close.
    Its pose stretches (sx) and fades (alpha) with the body's height above the line."""

    body: Motion
    shape: Shape
    floor_y: Callable[[np.ndarray], np.ndarray]
    darkness: float
    fade_px: float

    def pose(self, t: np.ndarray) -> np.ndarray:
        p = self.body.pose(t)
        h, _ = self.shape.support(np.einsum("tji,j->ti", rot(p[:, TH]), np.array([0.0, 1.0])))
        fy = self.floor_y(p[:, X])
        height = np.maximum(fy - (p[:, Y] + h), 0.0)
        fade = np.exp(-height / self.fade_px)
        return poses(p[:, X], fy, 0.0, 1.0 + height / (3 * self.fade_px), self.darkness * fade)
