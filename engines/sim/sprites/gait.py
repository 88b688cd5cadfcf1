"""Legged things. A walker's boots land heel first at speed on the ground (contacts); a dog's
legs swing as pendulums and never stop (no contacts); a bird hops on a perch (landings are
contacts too quiet to require); a person seen from the waist up bobs as they walk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.sim.sprites.bodies import Body, boot, paint
from engines.sim.sprites.kinematics import (
    Attached,
    Limb,
    Linear,
    OnLine,
    Track,
    Wave,
    anchor,
)
from engines.sim.sprites.scene import Cast, Surface, clear, landings
from engines.sim.sprites.shapes import ellipse, polygon, rounded_rect
from engines.sim.sprites.stage import Stage
from engines.sim.sprites.textures import body_colour, body_size, near_rgb


def _limb_body(rng, stage: Stage, length: float, width: float, rgb) -> Body:
    shape = rounded_rect(0, -width / 2, length, width / 2, width / 2)
    return Body("stick", ((shape, paint(rng, stage.look, rgb)),), None)


@dataclass(frozen=True)
class Gait:
    """How a walker walks: foot length (px), direction (+1 right), step period (s, per foot),
    the fraction of it a foot is in the air, and the stride (px, per foot per period)."""

    foot: float
    direction: float
    period: float
    swing: float
    stride: float

    @property
    def speed(self) -> float:
        return self.direction * self.stride / self.period


def sample_gait(rng: np.random.Generator, size: tuple[int, int]) -> Gait:
    w = size[0]
    close = rng.random() < 0.5
    foot = rng.uniform(0.12, 0.3) * w if close else rng.uniform(5, max(0.08 * w, 6))
    return Gait(
        foot=foot,
        direction=float(rng.choice([-1.0, 1.0])),
        period=rng.uniform(0.45, 0.85),
        swing=rng.uniform(0.3, 0.42),
        stride=rng.uniform(0.9, 2.2) * foot,
    )


def walker(
    rng: np.random.Generator, stage: Stage, floor: Surface, t_end: float, gait: Gait
) -> Cast:
    """Two boots stepping along a level floor line, legs up to a bobbing torso. Each heel strike
    is a contact."""
    w, _ = stage.size
    foot, direction, stride = gait.foot, gait.direction, gait.stride
    leg = rng.uniform(2.5, 4.0) * foot
    fx, fy = float(floor.p[0]), float(floor.p[1])
    tangent = np.array([floor.n[1], -floor.n[0]])
    x0 = rng.uniform(0.3, 0.7) * w - gait.speed * t_end * rng.uniform(0.0, 0.5)
    bob = rng.uniform(0.01, 0.04) * leg
    hips = Wave(
        Linear(x0, fy - 0.92 * leg, gait.speed, 0.0),
        dy=((bob, 2 / gait.period, rng.uniform(0, 6.3)),),
    )
    behind = stage.colour_at(x0, fy)
    shoe = boot(rng, foot, stage.look, behind)
    shoe = shoe if direction > 0 else shoe.mirrored(0)
    trouser = body_colour(rng, behind)[0]
    actors, hits = [], []
    for k, lag in enumerate((0.0, 0.5)):
        first = x0 + direction * stride * (lag - 0.5)
        s, gap, th = _foot_tracks(rng, first, fx, tangent, gait, lag, t_end)
        motion = OnLine((fx, fy), tuple(floor.n), shoe.shape, s, gap, th)
        sole = shoe.actor(motion)
        ankle = anchor(motion, (-0.55 * foot / 2 * direction, -0.7 * foot / 2))
        leg_body = _limb_body(
            rng, stage, leg, max(0.3 * foot, 1.5), near_rgb(rng, trouser, 0.08 * k)
        )
        layer = [leg_body.actor(Limb(anchor(hips, (0.0, 0.0)), ankle, leg)), sole]
        actors = layer + actors if k == 0 else actors + layer  # the far leg first
        own, rests = landings(sole, floor, gap, t_end)
        if not clear(sole, floor, own, 0.0, t_end, rests):
            return Cast([])
        hits += own
    torso = _torso(rng, stage, leg)
    actors.insert(1, torso[0].actor(Attached(hips, (0.0, 0.0))))
    actors.insert(2, torso[1].actor(Attached(hips, (0.0, -1.25 * leg))))
    return Cast(actors, hits)


def _foot_tracks(
    rng, x_first: float, fx: float, tangent: np.ndarray, gait: Gait, lag: float, t_end: float
):
    """s (along the floor), gap and angle tracks of one foot: stance, heel lift, swing arc,
    heel strike, foot flat."""
    to_s = float(tangent[0])  # the floor is level: s = (x - fx) * tangent_x
    period, swing, direction = gait.period, gait.swing, gait.direction
    x = x_first
    t = -period * (1 - lag)
    s, gap, th = Track(t, (x - fx) * to_s), Track(t, 0.0), Track(t, 0.0)
    lift, land = rng.uniform(0.1, 0.35), rng.uniform(0.1, 0.3)
    height = rng.uniform(0.15, 0.5) * gait.foot
    while t < t_end + period:
        off = t + period * (1 - swing)  # toe-off
        on = t + period  # heel strike
        th.hold(off - 0.25 * period).to(off, direction * lift, "smooth")
        s.hold(off)
        gap.hold(off)
        x += gait.stride * direction
        s.to(on, (x - fx) * to_s, "smooth")
        gap.to(on, 0.0, "bump", p=rng.uniform(1.3, 2.5), h=height)
        th.to(off + 0.5 * swing * period, -direction * land * 0.5, "smooth")
        th.to(on, -direction * land, "smooth").to(on + 0.2 * period, 0.0, "smooth")
        t = on
    return s, gap, th


def _torso(rng, stage: Stage, leg: float) -> tuple[Body, Body]:
    body = rounded_rect(-0.3 * leg, -1.1 * leg, 0.3 * leg, 0.05 * leg, 0.15 * leg)
    head = ellipse(0, 0, 0.2 * leg, 0.24 * leg)
    skin = (0.8, 0.6, 0.5)
    return (
        Body("box", ((body, paint(rng, stage.look, body_colour(rng)[0])),), None),
        Body("ball", ((head, paint(rng, stage.look, skin)),), None),
    )


def dog(rng: np.random.Generator, stage: Stage, floor: Surface, t_end: float) -> Cast:
    """A running quadruped: body, head and tail bob and wag, legs swing smoothly."""
    w, _ = stage.size
    length = rng.uniform(0.08, 0.45) * w
    leg = length * rng.uniform(0.4, 0.7)
    direction = rng.choice([-1.0, 1.0])
    speed = direction * length * rng.uniform(0.8, 3.0)
    gait = min(rng.uniform(1.5, 3.5), stage.max_hz(7.0) / 2)  # the body bobs at twice this
    y = float(floor.p[1]) - leg * 0.95 - length * 0.15
    x0 = rng.uniform(0.2, 0.8) * w - speed * t_end / 2
    torso = Wave(
        Linear(x0, y, speed, 0.0), dy=((0.05 * leg, gait * 2, 0.0),), dth=((0.05, gait, 1.0),)
    )
    fur, _ = body_colour(rng, stage.colour_at(x0, y))
    p = paint(rng, stage.look, fur)
    trunk = Body("ellipse", ((ellipse(0, 0, length / 2, length * 0.16), p),), None)
    head = Body("ellipse", ((ellipse(0, 0, length * 0.16, length * 0.11), p),), None)
    tail = Body("stick", ((rounded_rect(0, -1, length * 0.35, 1, 1), p),), None)
    actors = []
    for k, (hx, phase) in enumerate([(0.35, 0.0), (-0.35, 0.4), (0.3, 3.14), (-0.4, 3.6)]):
        hip = anchor(torso, (direction * hx * length, 0.1 * length))

        def paw(t, hip=hip, phase=phase):
            a = 0.45 * np.sin(2 * np.pi * gait * np.asarray(t) + phase)
            return hip(t) + leg * np.stack([np.sin(a) * direction, np.cos(a)], axis=1)

        limb = _limb_body(rng, stage, leg, max(length * 0.05, 1.2), fur)
        actors.insert(0 if k < 2 else len(actors), limb.actor(Limb(hip, paw, leg)))
    actors.insert(
        2,
        tail.actor(
            Attached(
                torso,
                (-direction * length / 2, -0.05 * length),
                np.pi if direction > 0 else 0.0,
                ((0.5, gait, 0.0),),
            )
        ),
    )
    actors.insert(3, trunk.actor(torso))
    actors.insert(
        4,
        head.actor(
            Attached(torso, (direction * length * 0.5, -length * 0.2), 0.0, ((0.1, gait, 0.5),))
        ),
    )
    return Cast(actors)


def bird(rng: np.random.Generator, stage: Stage, perch: Surface, t_end: float) -> Cast:
    """A small bird hopping along a perch; each landing is a quiet contact."""
    w, _ = stage.size
    r = body_size(rng, w, 0.015, 0.06)
    rgb, _ = body_colour(rng, stage.colour_at(*perch.p))
    p = paint(rng, stage.look, rgb)
    shape = ellipse(0, -r * 0.6, r, r * 0.6, rng.uniform(-0.3, 0.3))
    beak = polygon(np.array([[0.9 * r, -1.2 * r], [1.5 * r, -1.0 * r], [0.9 * r, -0.9 * r]]))
    body = Body(
        "ball", ((shape, p), (ellipse(0.7 * r, -1.1 * r, 0.45 * r, 0.45 * r), p), (beak, p)), None
    )
    body = body if rng.random() < 0.5 else body.mirrored(0)
    s0 = rng.uniform(-0.3, 0.3) * w
    s, gap, th = Track(0, s0), Track(0, 0.0), Track(0, 0.0)
    t = rng.uniform(0.1, 0.8)
    while t < t_end + 1:
        dur = rng.uniform(0.1, 0.3)
        s0 += rng.choice([-1, 0, 1]) * rng.uniform(0.5, 3) * r
        s.hold(t).to(t + dur, s0, "lin")
        gap.hold(t).to(t + dur, 0.0, "bump", p=1.0, h=rng.uniform(0.5, 3) * r)
        th.hold(t + dur + 0.05).to(t + dur + 0.25, rng.uniform(-0.4, 0.4), "smooth")
        t += dur + rng.uniform(0.3, 1.2)
    actor = body.actor(OnLine(perch.p, perch.n, body.shape, s, gap, th))
    hits, rests = landings(actor, perch, gap, t_end, quiet=True)
    return Cast([actor], hits if clear(actor, perch, hits, 0.0, t_end, rests) else [])


def bobber(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """A person from the waist up walking across: the torso and head bob, arms swing."""
    w, h = stage.size
    size = rng.uniform(0.2, 0.9) * h
    direction = rng.choice([-1.0, 1.0])
    speed = direction * size * rng.uniform(0.2, 0.8)
    period = rng.uniform(0.9, 1.4)
    x0 = rng.uniform(0.2, 0.8) * w - speed * t_end / 2
    torso = Wave(
        Linear(x0, h + 0.1 * size, speed, 0.0),
        dy=((0.03 * size, 2 / period, 0.0),),
        dth=((0.03, 1 / period, 0.0),),
    )
    shirt = body_colour(rng)[0]
    trunk = Body(
        "box",
        (
            (
                rounded_rect(-0.25 * size, -0.8 * size, 0.25 * size, 0.3 * size, 0.1 * size),
                paint(rng, stage.look, shirt),
            ),
        ),
        None,
    )
    head = Body(
        "ball",
        ((ellipse(0, 0, 0.13 * size, 0.16 * size), paint(rng, stage.look, (0.8, 0.6, 0.5))),),
        None,
    )
    arm = _limb_body(rng, stage, 0.6 * size, 0.09 * size, shirt)
    actors = [arm.actor(Attached(torso, (0.0, -0.7 * size), np.pi / 2, ((0.4, 1 / period, 0.0),)))]
    actors += [trunk.actor(torso), head.actor(Attached(torso, (0.0, -1.0 * size)))]
    actors.append(
        arm.actor(Attached(torso, (0.0, -0.7 * size), np.pi / 2, ((0.4, 1 / period, np.pi),)))
    )
    return Cast(actors)
