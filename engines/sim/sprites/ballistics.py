"""Screen-space ballistics: a body falls, bounces on lines, slides or rolls, and settles.

The motion is a chain of closed-form phases (held, flying on a parabola, sliding or rolling
along a line), so each bounce time is the root of the gap between the body's outline and the
line along one parabola, solved with Brent's method to 1e-10 s: exact, not frame-quantised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from engines.sim.sprites.kinematics import poses
from engines.sim.sprites.scene import Surface, body_gap
from engines.sim.sprites.shapes import Shape

SEARCH_DT = 1e-3  # grid on which a sign change of the gap is looked for before Brent
SETTLE_PX = 0.4  # a rebound lower than this becomes sliding or rolling
MAX_EVENTS = 40


@dataclass(frozen=True)
class _Settle:
    """A body sliding on a line tips onto a flat side: its angle eases from th0 to `rest` over
    `seconds`, its centre kept at the support height above the line."""

    shape: Shape
    n: np.ndarray
    rest: float
    seconds: float


@dataclass(frozen=True)
class _Phase:
    """From t0: centre c0 + v0 tau + a tau^2 / 2 (tau = t - t0, frozen after `stop`), angle
    th0 + w tau (or rolling: th0 - (distance travelled) / radius, or settling)."""

    t0: float
    c0: np.ndarray
    v0: np.ndarray
    a: np.ndarray
    th0: float
    w: float
    stop: float = np.inf  # seconds after t0 when sliding comes to rest
    roll_r: float = 0.0  # rolling without slipping on `tangent`, radius px
    tangent: np.ndarray | None = None
    settle: _Settle | None = None

    def pose(self, t: np.ndarray) -> np.ndarray:
        tau = np.clip(np.asarray(t, np.float64) - self.t0, 0.0, self.stop)
        c = self.c0 + self.v0 * tau[:, None] + 0.5 * self.a * tau[:, None] ** 2
        if self.roll_r > 0 and self.tangent is not None:
            th = self.th0 - ((c - self.c0) @ self.tangent) / self.roll_r
        elif self.settle is not None:
            st = self.settle
            u = np.clip((np.asarray(t, np.float64) - self.t0) / st.seconds, 0.0, 1.0)
            th = self.th0 + (st.rest - self.th0) * (0.5 - 0.5 * np.cos(np.pi * u))
            c = c + np.outer(_height(st.shape, st.n, th) - _height(st.shape, st.n, self.th0), st.n)
        else:
            th = self.th0 + self.w * tau
        return poses(c[:, 0], c[:, 1], th)

    def velocity(self, t: float) -> np.ndarray:
        tau = min(max(t - self.t0, 0.0), self.stop)
        return self.v0 + self.a * tau if tau < self.stop else np.zeros(2)


def _height(shape: Shape, n: np.ndarray, th: np.ndarray | float) -> np.ndarray:
    """How far the body reaches below its origin toward a line of normal n, at angles th."""
    th = np.atleast_1d(np.asarray(th, np.float64))
    c, s = np.cos(th), np.sin(th)
    d = np.stack([-(c * n[0] + s * n[1]), -(-s * n[0] + c * n[1])], axis=1)  # R(th)^T (-n)
    return shape.support(d)[0]


def _rest_angle(shape: Shape, n: np.ndarray, th0: float) -> float:
    """The angle a body tips to from th0: downhill on its height over the line, to a flat side."""
    step = np.pi / 180
    th = th0
    for _ in range(180):
        h = _height(shape, n, [th - step, th, th + step])
        if h[1] <= h[0] and h[1] <= h[2]:
            break
        th += step if h[2] < h[0] else -step
    return float(th)


@dataclass(frozen=True)
class Ballistic:
    phases: tuple[_Phase, ...]

    def pose(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.float64)
        starts = np.array([p.t0 for p in self.phases])
        idx = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(starts) - 1)
        out = np.empty((len(t), 5))
        for i in np.unique(idx):
            sel = idx == i
            out[sel] = self.phases[i].pose(t[sel])
        return out


@dataclass(frozen=True)
class Bounce:
    time_s: float
    surface: Surface
    speed_px_s: float


def fall(
    shape: Shape,
    c0: tuple[float, float],
    *,
    g: float,
    surfaces: list[Surface],
    t_end: float,
    release_s: float = 0.0,
    v0: tuple[float, float] = (0.0, 0.0),
    th0: float = 0.0,
    spin: float = 0.0,
    restitution: float = 0.5,
    friction: float = 0.4,
    rng: np.random.Generator | None = None,
) -> tuple[Ballistic, list[Bounce]]:
    """Drop `shape` from centre c0 (held until `release_s`) among `surfaces`; gravity points
    down the picture. Returns its motion and its bounces until t_end."""
    rng = rng or np.random.default_rng(0)
    gvec = np.array([0.0, g])
    round_r = _round_radius(shape)
    phases = [_Phase(-1.0, np.asarray(c0, float), np.zeros(2), np.zeros(2), th0, 0.0)]
    bounces: list[Bounce] = []
    flight = _Phase(release_s, np.asarray(c0, float), np.asarray(v0, float), gvec, th0, spin)
    phase, on = flight, None
    for _ in range(MAX_EVENTS):
        phases.append(phase)
        found = _next_contact(shape, phase, [s for s in surfaces if s is not on], t_end)
        if on is not None:
            off_end = _leaves(shape, phase, on, t_end)
            if off_end is not None and (found is None or off_end < found[0]):
                phase, on = _launch(phase, off_end, gvec), None
                continue
        if found is None:
            break
        tc, surf = found
        v, n = phase.velocity(tc), np.asarray(surf.n)
        vn = float(v @ n)
        bounces.append(Bounce(tc, surf, -vn))
        pose = phase.pose(np.array([tc]))[0]
        tangent = np.array([n[1], -n[0]])
        vt = (v @ tangent) * tangent * (1 - rng.uniform(0.0, 0.3))
        g_n = -float(gvec @ n)
        if on is not None:  # sliding into a wall: turn round along the same line
            phase = _slide(pose, -restitution * v, on, gvec, tc, friction, round_r, shape)
            continue
        rebound = -restitution * vn
        if g_n > 0.3 * g and rebound**2 < 2 * g_n * SETTLE_PX:
            phase, on = _slide(pose, vt, surf, gvec, tc, friction, round_r, shape), surf
            continue
        w = (
            -(vt @ tangent) / round_r
            if round_r
            else phase.w * rng.uniform(-0.5, 0.8) + rng.uniform(-2, 2)
        )
        phase = _Phase(tc, pose[:2], vt + rebound * n, gvec, pose[2], w)
    return Ballistic(tuple(phases)), bounces


def _round_radius(shape: Shape) -> float:
    if len(shape.ellipses) == 1 and not shape.polygons:
        cx, cy, a, b, _ = shape.ellipses[0]
        if abs(a - b) < 1e-9 and abs(cx) < 1e-9 and abs(cy) < 1e-9:
            return float(a)
    return 0.0


def _next_contact(
    shape: Shape, phase: _Phase, surfaces: list[Surface], t_end: float
) -> tuple[float, Surface] | None:
    """The first time after phase.t0 that the body reaches one of the surfaces from outside."""
    best: tuple[float, Surface] | None = None
    t0 = phase.t0
    span = 0.25
    while t0 < t_end and best is None:
        t = np.arange(t0 + 1e-7, min(t0 + span, t_end) + SEARCH_DT, SEARCH_DT)
        for surf in surfaces:
            g, _ = body_gap(shape, phase, surf, t)
            hit = np.nonzero((g[1:] <= 0) & (g[:-1] > 0))[0]
            if len(hit) and (best is None or t[hit[0] + 1] < best[0] + SEARCH_DT):
                a, b = t[hit[0]], t[hit[0] + 1]
                tc = brentq(
                    lambda x, s=surf: body_gap(shape, phase, s, np.array([x]))[0][0],
                    a,
                    b,
                    xtol=1e-10,
                )
                if best is None or tc < best[0]:
                    best = (float(tc), surf)
        t0, span = t0 + span, span * 2
    return best if best is not None and best[0] < t_end else None


def _slide(
    pose: np.ndarray,
    v: np.ndarray,
    surf: Surface,
    gvec: np.ndarray,
    t0: float,
    friction: float,
    round_r: float,
    shape: Shape | None = None,
) -> _Phase:
    """Sliding (or rolling, for a disc) along the surface line from pose with velocity v; a
    body that is not round tips onto a flat side."""
    n = np.asarray(surf.n)
    tangent = np.array([n[1], -n[0]])
    vs = float(v @ tangent)
    g_t, g_n = float(gvec @ tangent), -float(gvec @ n)
    drag = (0.03 if round_r else friction) * g_n
    a = g_t - np.sign(vs if vs else g_t) * drag
    stop = np.inf
    if abs(g_t) < drag and vs != 0 and np.sign(a) != np.sign(vs):
        stop = -vs / a
    elif abs(g_t) < drag:
        a, stop = 0.0, 0.0
    c = pose[:2]
    settle = None
    if not round_r and shape is not None:
        rest = _rest_angle(shape, n, float(pose[2]))
        if abs(rest - pose[2]) > 1e-3:
            settle = _Settle(shape, n, rest, 0.1 + 0.3 * abs(rest - pose[2]))
    return _Phase(t0, c, vs * tangent, a * tangent, pose[2], 0.0, stop, round_r, tangent, settle)


def _leaves(shape: Shape, phase: _Phase, surf: Surface, t_end: float) -> float | None:
    """When a sliding body's contact point runs off the end of its line, if it does."""
    if not np.isfinite(surf.half_len):
        return None
    t = np.arange(phase.t0, t_end, SEARCH_DT)
    _, point = body_gap(shape, phase, surf, t)
    n = np.asarray(surf.n)
    along = (point - np.asarray(surf.p)) @ np.array([n[1], -n[0]])
    out = np.nonzero(np.abs(along) > surf.half_len)[0]
    return float(t[out[0]]) if len(out) else None


def _launch(phase: _Phase, t: float, gvec: np.ndarray) -> _Phase:
    """Flight from where a slide runs off its line."""
    pose = phase.pose(np.array([t]))[0]
    v = phase.velocity(t)
    w = -(v @ phase.tangent) / phase.roll_r if phase.roll_r and phase.tangent is not None else 0.0
    return _Phase(t, pose[:2], v, gvec, pose[2], w)
