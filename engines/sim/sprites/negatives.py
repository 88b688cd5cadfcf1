"""Motion without contact: what the detector must stay silent on.

`swing`: tools and hands swung about a wrist, turning round smoothly (the easing reaches zero
velocity over many frames), sometimes right next to a surface without touching it. Also waving,
conducting and windscreen wipers. `shaker`, `flapper`, `talker`: wobbling things.
`passers`, `traffic`: bodies crossing at constant velocity, in front of or behind others.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from engines.sim.sprites.bodies import FREE, TOOLS, Body, free, hand, paint, tool
from engines.sim.sprites.kinematics import (
    Attached,
    Linear,
    OnLine,
    Pivot,
    Still,
    Track,
    Wave,
)
from engines.sim.sprites.scene import Actor, Cast, Surface, body_gap, clear
from engines.sim.sprites.shapes import ellipse, polygon, rounded_rect
from engines.sim.sprites.stage import Stage
from engines.sim.sprites.strike import along, contact_pose, contact_spots, raise_room
from engines.sim.sprites.textures import body_colour, body_size


def _smooth_between(rng, track: Track, near: float, far: np.ndarray, t_end: float) -> None:
    """Turn-arounds at `near` and at random values toward `far`, each reached with zero speed."""
    t = 0.0
    while t < t_end:
        dur = rng.uniform(0.2, 1.0)
        track.to(t + dur, near if rng.random() < 0.5 else float(rng.choice(far)), "smooth")
        t += dur
        if rng.random() < 0.3:
            t += rng.uniform(0.05, 0.4)
            track.hold(t)


def pivot_swing(rng, body: Body, surface: Surface, size, t_end: float) -> Actor | None:
    """A tool swung about a wrist that turns round `margin` px short of the surface."""
    shape = body.shape
    thc, offset = contact_pose(rng, shape, surface)
    wrist = (
        np.asarray(surface.p) + contact_spots(rng, surface, size, 1)[0] * along(surface) - offset
    )
    sigma, reach = raise_room(shape, wrist, thc, surface)
    if reach < 0.3:
        return None
    margin = float(np.exp(rng.uniform(np.log(1.0), np.log(15.0))))

    def gap_at(angle: float) -> float:
        motion = Pivot(Track(0, wrist[0]), Track(0, wrist[1]), Track(0, angle))
        return float(body_gap(shape, motion, surface, np.array([0.0]))[0][0]) - margin

    if gap_at(thc + sigma * reach) <= 0:
        return None
    near = brentq(lambda a: gap_at(thc + sigma * a), 1e-4, reach, xtol=1e-9)
    th = Track(0, thc + sigma * rng.uniform(near, reach))
    _smooth_between(rng, th, thc + sigma * near, thc + sigma * np.linspace(near, reach, 8), t_end)
    actor = body.actor(Pivot(Track(0, wrist[0]), Track(0, wrist[1]), th))
    return actor if clear(actor, surface, [], 0.0, t_end) else None


def press_swing(rng, body: Body, surface: Surface, size, t_end: float) -> Actor | None:
    """A body moved toward a surface and back that always stops short of it, smoothly."""
    n = np.asarray(surface.n)
    th0 = float(np.arctan2(n[0], -n[1]))
    margin = float(np.exp(rng.uniform(np.log(1.0), np.log(15.0))))
    s = Track(0, contact_spots(rng, surface, size, 1)[0])
    gap = Track(0, margin + body.shape.size)
    _smooth_between(rng, gap, margin, margin + body.shape.size * np.linspace(0.3, 1.5, 6), t_end)
    th = Track(0, th0)
    _smooth_between(rng, th, th0, th0 + np.linspace(-0.3, 0.3, 5), t_end)
    actor = body.actor(OnLine(surface.p, tuple(n), body.shape, s, gap, th))
    return actor if clear(actor, surface, [], 0.0, t_end) else None


def waver(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """A hand waving, a baton conducting or a wiper sweeping: sinusoids about a moving wrist."""
    w, h = stage.size
    style = str(rng.choice(["wave", "conduct", "wiper"]))
    behind = stage.colour_at(w / 2, h / 2)
    if style == "wiper":
        length = rng.uniform(0.6, 1.1) * max(w, h)
        body = Body(
            "stick",
            ((rounded_rect(0, -3, length, 3, 2), paint(rng, stage.look, (0.05, 0.05, 0.06))),),
            None,
        )
        base = Still(rng.uniform(0.2, 0.8) * w, h + 5, -np.pi / 2)
        hz = rng.uniform(0.4, 1.0)
        return Cast([body.actor(Wave(base, dth=((rng.uniform(0.5, 1.0), hz, 0.0),)))])
    size = body_size(rng, min(w, h), 0.15, 0.6)
    body = (
        hand(rng, size, stage.look)
        if style == "wave"
        else tool(rng, "stick", size, stage.look, behind)
    )
    wrist = Still(rng.uniform(0.2, 0.8) * w, rng.uniform(0.3, 0.9) * h, rng.uniform(-np.pi, 0))
    hz = rng.uniform(0.5, stage.max_hz(3.0) / 2)  # with a second harmonic

    def terms(amp):
        return tuple((amp * rng.uniform(0.3, 1), hz * k, rng.uniform(0, 6.3)) for k in (1, 2))

    motion = Wave(wrist, dx=terms(0.3 * size), dy=terms(0.3 * size), dth=terms(0.8))
    return Cast([body.actor(motion)])


def shaker(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """A body shaken or wobbling in place (a rattle without sound, a bobbing toy, a branch)."""
    w, h = stage.size
    size = body_size(rng, min(w, h), 0.05, 0.5)
    body = free(rng, str(rng.choice(FREE)), size, stage.look, stage.colour_at(w / 2, h / 2))
    base = Still(rng.uniform(0.1, 0.9) * w, rng.uniform(0.1, 0.9) * h, rng.uniform(0, 6.3))
    hz = rng.uniform(0.5, stage.max_hz(8.0))
    amp = rng.uniform(0.05, 0.5) * size
    motion = Wave(
        base,
        dx=((amp, hz, 0.0),),
        dy=((amp * rng.uniform(0, 1), hz, 1.0),),
        dth=((rng.uniform(0, 0.5), hz / 2, 0.0),),
    )
    return Cast([body.actor(motion)])


def flapper(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """A bird-like blob flying across with flapping wings."""
    w, h = stage.size
    r = body_size(rng, w, 0.02, 0.08)
    rgb, _ = body_colour(rng)
    p = paint(rng, stage.look, rgb)
    v = rng.choice([-1, 1]) * rng.uniform(1, 6) * r * 4
    glide = Wave(
        Linear(
            rng.uniform(0, w) - v * t_end / 2,
            rng.uniform(0.1, 0.7) * h,
            v,
            rng.uniform(-0.2, 0.2) * abs(v),
        ),
        dy=((0.3 * r, rng.uniform(1, 3), 0.0),),
    )
    trunk = Body("ellipse", ((ellipse(0, 0, r, 0.5 * r), p),), None)
    wing = Body(
        "polygon", ((polygon(np.array([[0, -0.3 * r], [2.2 * r, 0], [0, 0.5 * r]])), p),), None
    )
    hz = rng.uniform(2.0, stage.max_hz(10.0))
    wings = [
        wing.actor(Attached(glide, (0, 0), -np.pi / 2 + side, ((0.9, hz, 0.0),)))
        for side in (-0.3, 0.3)
    ]
    return Cast([wings[0], trunk.actor(glide), wings[1]])


def talker(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """A talking head: a large head nodding slightly, blinking, the mouth opening and closing."""
    w, h = stage.size
    size = rng.uniform(0.3, 0.9) * h
    skin = tuple(np.array([0.85, 0.62, 0.5]) * rng.uniform(0.4, 1.15))
    head = Body(
        "ball", ((ellipse(0, 0, 0.38 * size, 0.5 * size), paint(rng, stage.look, skin)),), None
    )
    dark = paint(rng, stage.look, (0.1, 0.05, 0.05))
    mouth = Body("ellipse", ((ellipse(0, 0, 0.04 * size, 0.12 * size), dark),), None)
    eye = Body("ellipse", ((ellipse(0, 0, 0.05 * size, 0.03 * size), dark),), None)
    base = Still(rng.uniform(0.3, 0.7) * w, rng.uniform(0.45, 0.7) * h)
    nod = Wave(
        base,
        dx=((0.02 * size, rng.uniform(0.2, 0.6), 0.0),),
        dy=((0.015 * size, rng.uniform(0.3, 1.0), 1.0),),
        dth=((0.04, rng.uniform(0.2, 0.5), 0.0),),
    )
    syllables = rng.uniform(1.5, stage.max_hz(5.0))
    actors = [
        head.actor(nod),
        mouth.actor(Attached(nod, (0, 0.25 * size), np.pi / 2, stretch=((0.6, syllables, 0.0),))),
    ]
    actors += [eye.actor(Attached(nod, (sx * 0.15 * size, -0.1 * size))) for sx in (-1, 1)]
    return Cast(actors)


def passers(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """One to five bodies crossing at constant velocity (and spin), overlapping each other."""
    w, h = stage.size
    actors = []
    for _ in range(int(rng.integers(1, 6))):
        size = body_size(rng, min(w, h), 0.05, 0.4)
        y = rng.uniform(0.05, 0.95) * h
        vx = rng.choice([-1, 1]) * rng.uniform(0.05, 1.5) * w / 2
        vy = rng.uniform(-0.3, 0.3) * abs(vx)
        x0 = rng.uniform(0, w) - vx * t_end * rng.uniform(0, 1)
        spin = rng.uniform(-6, 6) if rng.random() < 0.4 else 0.0
        body = free(rng, str(rng.choice(FREE)), size, stage.look, stage.colour_at(w / 2, y))
        actors.append(body.actor(Linear(x0, y, vx, vy, rng.uniform(0, 6.3), spin)))
    return Cast(actors)


def traffic(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """Vehicles (a body on two turning wheels) in lanes at steady speeds, at most six a lane,
    all of which cross the picture at some time."""
    w, h = stage.size
    actors = []
    for y in rng.uniform(0.3, 0.95, int(rng.integers(1, 4))) * h:
        size = body_size(rng, w, 0.1, 0.5)
        speed = rng.choice([-1, 1]) * rng.uniform(0.2, 2.5) * size
        spacing = max(rng.uniform(1.5, 5) * size, abs(speed) * t_end / 5)
        # positions at t = 0 of cars that are in view at some time in [0, t_end]
        lo, hi = sorted((-size - speed * t_end, w + size - speed * t_end))
        lo, hi = min(lo, -size), max(hi, w + size)
        for x0 in np.arange(lo + rng.uniform(0, spacing), hi, spacing)[:6]:
            actors += _vehicle(rng, stage, x0, y, size, speed)
    return Cast(actors)


def _vehicle(rng, stage: Stage, x0: float, y: float, size: float, speed: float) -> list[Actor]:
    rgb, _ = body_colour(rng)
    hull = rounded_rect(-size / 2, -0.35 * size, size / 2, 0, 0.08 * size)
    out = [
        Body("box", ((hull, paint(rng, stage.look, rgb)),), "metal").actor(
            Linear(x0, y - 0.1 * size, speed, 0.0)
        )
    ]
    r = 0.1 * size
    wheel = Body(
        "ball", ((ellipse(0, 0, r, r), paint(rng, stage.look, (0.08, 0.08, 0.08))),), "rubber"
    )
    for dx in (-0.3, 0.3):
        motion = Linear(x0 + dx * size, y - 0.1 * size + r * 0.5, speed, 0.0, 0.0, speed / r)
        out.append(wheel.actor(motion))
    return out


def stills(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """Bodies at rest: furniture on a camera-only or a static shot."""
    w, h = stage.size
    actors = []
    for _ in range(int(rng.integers(0, 5))):
        size = body_size(rng, min(w, h), 0.05, 0.4)
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        kind = str(rng.choice(FREE + TOOLS))
        maker = tool if kind in TOOLS else free
        body = maker(rng, kind, size, stage.look, stage.colour_at(x, y))
        actors.append(body.actor(Still(x, y, rng.uniform(0, 6.3))))
    return Cast(actors)


def occluders(rng: np.random.Generator, stage: Stage) -> Cast:
    """Foreground things that hide part of the action: posts, frames, leaves."""
    w, h = stage.size
    actors = []
    for _ in range(int(rng.integers(1, 3))):
        rgb, _ = body_colour(rng)
        if rng.random() < 0.5:
            thick = rng.uniform(3, 0.15 * w)
            shape = rounded_rect(-thick / 2, -h, thick / 2, h, 0)
            motion = Still(rng.uniform(0, w), h / 2, rng.uniform(-0.2, 0.2))
        else:
            size = rng.uniform(0.1, 0.4) * min(w, h)
            shape = free(rng, "blob", size, stage.look, rgb).shape
            motion = Still(
                rng.choice([rng.uniform(0, 0.2), rng.uniform(0.8, 1.0)]) * w, rng.uniform(0, h)
            )
        actors.append(Body("blob", ((shape, paint(rng, stage.look, rgb)),), None).actor(motion))
    return Cast(actors)
