"""`strike`: a driven body (stick, hammer, mallet, hand, boot, fist) accelerates into a surface
and stops abruptly (or rebounds) at the contact, dwells, lifts and strikes again.

Two drives: `pivot_strikes` turns a tool about a wrist until its outline meets the line (the
contact angle is solved first, then the wrist is placed so the tool touches where wanted);
`press_strikes` moves a body along its gap to the line (`OnLine`), so the gap is 0 at the knot.
Either way the contact is a knot of the motion: its time is exact by construction, and `clear`
checks the body touches nowhere else. The easing into a knot is `accel` (full speed at the
contact); out of it `decel` (a rebound) or, after a dwell, `smooth`.
"""

from __future__ import annotations

import numpy as np

from engines.sim.sprites.bodies import Body
from engines.sim.sprites.kinematics import OnLine, Pivot, Track, rot
from engines.sim.sprites.scene import Actor, Hit, Surface, body_gap, clear

ATTEMPTS = 6


def contact_times(rng: np.random.Generator, t_end: float, first: float = 0.1) -> list[float]:
    """Contact times from `first` on, 0.15-1.5 s apart: steady with jitter, or irregular."""
    base = float(np.exp(rng.uniform(np.log(0.15), np.log(1.5))))
    jitter = rng.uniform(0.0, 0.5) if rng.random() < 0.5 else rng.uniform(0.5, 1.0)
    t = rng.uniform(first, first + base)
    out = []
    while t < t_end:
        out.append(float(t))
        t += float(np.clip(base * (1 + jitter * rng.uniform(-1, 1)), 0.15, 1.5))
    return out


def along(surface: Surface) -> np.ndarray:
    n = np.asarray(surface.n)
    return np.array([n[1], -n[0]])


def contact_spots(
    rng: np.random.Generator, surface: Surface, size: tuple[int, int], k: int
) -> np.ndarray:
    """k tangent coordinates on the surface, mostly where the picture shows it."""
    tangent, p = along(surface), np.asarray(surface.p)
    w, h = size
    lo, hi = -surface.half_len * 0.85, surface.half_len * 0.85
    # the part of the (infinite) line inside the picture
    s = np.linspace(-2 * (w + h), 2 * (w + h), 801)
    pts = p + s[:, None] * tangent
    inside = (
        (pts[:, 0] > 0.05 * w)
        & (pts[:, 0] < 0.95 * w)
        & (pts[:, 1] > 0.05 * h)
        & (pts[:, 1] < 0.95 * h)
    )
    if inside.any():
        lo, hi = max(lo, s[inside].min()), min(hi, s[inside].max())
    lo, hi = max(lo, -(w + h)), min(hi, w + h)
    if hi <= lo:
        lo = hi = 0.0
    centre = rng.uniform(lo, hi)
    spread = rng.uniform(0.0, 0.5) * (hi - lo)
    return np.clip(centre + rng.uniform(-0.5, 0.5, k) * spread, lo, hi)


def pivot_strikes(
    rng: np.random.Generator, body: Body, surface: Surface, times: list[float], size, t_end: float
) -> tuple[Actor, list[Hit]] | None:
    """A tool (origin at the grip) swung about the wrist onto `surface` at `times`."""
    shape = body.shape
    for _ in range(ATTEMPTS):
        thc, offset = contact_pose(rng, shape, surface)
        wrists = (
            np.asarray(surface.p)
            + contact_spots(rng, surface, size, len(times) + 1)[:, None] * along(surface)
            - offset
        )
        sigma, reach = raise_room(shape, wrists[0], thc, surface)
        if reach < 0.3:
            continue
        ups = thc + sigma * rng.uniform(0.35, 1.0, len(times) + 1) * reach
        th, px, py = Track(0, ups[0]), Track(0, wrists[0, 0]), Track(0, wrists[0, 1])
        actor = body.actor(Pivot(px, py, th))
        hits = _timeline(rng, actor, surface, times, th, thc, ups, t_end, (px, py, wrists))
        if clear(actor, surface, hits, 0.0, t_end):
            return actor, hits
    return None


def contact_pose(rng: np.random.Generator, shape, surface: Surface) -> tuple[float, np.ndarray]:
    """A tool's angle when it meets the surface (at 7-70 degrees to it, from either side) and
    where the grip sits relative to the point of contact then."""
    n = np.asarray(surface.n)
    beta = rng.uniform(0.12, 1.25)
    d = rng.choice([-1.0, 1.0]) * along(surface) * np.cos(beta) - n * np.sin(beta)
    thc = float(np.arctan2(d[1], d[0]))
    _, sb = shape.support((rot(thc).T @ -n)[None])
    return thc, rot(thc) @ sb[0]


def raise_room(shape, wrist: np.ndarray, thc: float, surface: Surface) -> tuple[float, float]:
    """Which way (+1/-1) lifts the tool off the surface from the contact angle, and how far
    (rad, up to 1.6) it can turn that way before its outline would meet the line again."""
    best = (1.0, 0.0)
    for sigma in (1.0, -1.0):
        angles = thc + sigma * np.linspace(0.002, 1.6, 160)
        track = Track(0, angles[0]).to(1, angles[-1], "lin")
        motion = Pivot(Track(0, wrist[0]), Track(0, wrist[1]), track)
        g, _ = body_gap(shape, motion, surface, np.linspace(0, 1, 160))
        if g[0] <= 0:
            continue
        bad = np.nonzero(g <= 0)[0]
        reach = 0.8 * abs(float(angles[bad[0]] - thc)) if len(bad) else 1.6
        if reach > best[1]:
            best = (sigma, reach)
    return best


def _timeline(rng, actor, surface, times, track: Track, contact: float, ups, t_end, wrist=None):
    """Fill `track` for strikes at `times`: hold, accelerate into the `contact` value, dwell or
    rebound, lift to the next raised value `ups[k + 1]`. `wrist` (x track, y track, positions
    per stroke) moves only while the body is lifted. Returns the hits."""
    hits = []
    free_from = 0.0
    e = rng.uniform(0.2, 0.7)  # rebound speed / impact speed
    for k, tc in enumerate(times):
        nxt = times[k + 1] if k + 1 < len(times) else t_end + 1.0
        t_down = min(rng.uniform(0.05, 0.35), 0.7 * (tc - free_from))
        p = rng.uniform(1.5, 3.5)
        track.hold(tc - t_down).to(tc, contact, "accel", p=p)
        avail = nxt - tc
        rebound = rng.random() < 0.5
        dwell = 0.0 if rebound else rng.uniform(0.0, min(0.15, 0.3 * avail))
        lift_end = tc + dwell + rng.uniform(0.35, 0.6) * (avail - dwell)
        hits.append(Hit(tc, actor, surface, tc + dwell))
        speed_in = abs(ups[k] - contact) * p / t_down
        t_lift = 2 * abs(ups[k + 1] - contact) / max(e * speed_in, 1e-6)  # decel p=2 starts at 2x
        if rebound and t_lift < 0.9 * (lift_end - tc):
            track.to(tc + t_lift, ups[k + 1], "decel", p=2.0).hold(lift_end)
        else:
            track.hold(tc + dwell).to(lift_end, ups[k + 1], "smooth")
        if wrist is not None:
            mx, my, pos = wrist
            mx.hold(tc + dwell).to(lift_end, pos[k + 1, 0], "smooth")
            my.hold(tc + dwell).to(lift_end, pos[k + 1, 1], "smooth")
        free_from = lift_end
    return hits


def press_strikes(
    rng: np.random.Generator, body: Body, surface: Surface, times: list[float], size, t_end: float
) -> tuple[Actor, list[Hit]] | None:
    """A body driven along its gap to the surface (a hand on a drum, a stamping boot, a fist on a
    door); some strikes glance: the body keeps sliding along while it bounces off."""
    n = np.asarray(surface.n)
    th0 = float(np.arctan2(n[0], -n[1]))  # the body's +y side (a sole, a palm) faces the line
    bsize = body.shape.size
    for _ in range(ATTEMPTS):
        spots = contact_spots(rng, surface, size, len(times) + 1)
        lifts = rng.uniform(0.2, 1.5, len(times) + 1) * bsize
        tilts = th0 + rng.uniform(-0.3, 0.3, len(times) + 1)
        s, g, th = Track(0, spots[0]), Track(0, lifts[0]), Track(0, tilts[0])
        actor = body.actor(OnLine(tuple(surface.p), tuple(n), body.shape, s, g, th))
        hits = _timeline(rng, actor, surface, times, g, 0.0, lifts, t_end)
        _slide_between(rng, hits, s, spots, th, tilts, actor.shape.size, t_end)
        if clear(actor, surface, hits, 0.0, t_end):
            return actor, hits
    return None


def _slide_between(rng, hits, s: Track, spots, th: Track, tilts, bsize: float, t_end) -> None:
    """Move the body along the line and tilt it while it is lifted; a glancing strike keeps
    sliding through the contact."""
    glance = rng.uniform(0.5, 3.0) * bsize if rng.random() < 0.3 else 0.0
    for k, hit in enumerate(hits):
        t_before = max(hit.time_s - 0.05, s.end[0] + 1e-3)
        if glance and t_before < hit.time_s - 1e-3:
            sign = rng.choice([-1.0, 1.0])
            s.hold(t_before).to(hit.time_s, spots[k] + sign * glance * 0.05, "lin")
            s.to(hit.time_s + 0.05, spots[k] + sign * glance * 0.12, "decel")
        else:
            s.hold(hit.time_s)
        th.hold(hit.time_s)
        nxt = hits[k + 1].time_s if k + 1 < len(hits) else t_end + 1.0
        settle = max(hit.until_s, s.end[0]) + 0.05
        if settle + 0.1 < nxt - 0.05:
            s.hold(settle).to(nxt - 0.1, spots[k + 1], "smooth")
            th.hold(settle).to(nxt - 0.1, tilts[k + 1], "smooth")
