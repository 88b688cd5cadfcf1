"""`drop`: one to three bodies dropped or thrown onto a floor, maybe with a shelf or table and
a wall; they bounce until they settle or roll away (`ballistics.fall`).

Gravity is 300-3000 px/s^2 to stand for different distances and zooms; the scale it implies
(px per metre = g / 9.81) sets each body's real size, hence which late, small bounces are too
quiet to be required.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.sim.sprites.ballistics import fall
from engines.sim.sprites.bodies import FREE, free
from engines.sim.sprites.kinematics import Shadow, Still
from engines.sim.sprites.props import floor_line, shelf, table, wall_edge
from engines.sim.sprites.scene import Actor, Cast, Hit, body_gap
from engines.sim.sprites.shapes import Paint, Sprite, ellipse, rasterise
from engines.sim.sprites.stage import Stage
from engines.sim.sprites.textures import body_size, log_uniform


def drop_cast(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    """One to three bodies dropped or thrown onto a floor, maybe with a shelf and a wall."""
    w, h = stage.size
    g = log_uniform(rng, 300, 3000)
    floor = floor_line(rng, stage)
    surfaces = [floor]
    if rng.random() < 0.4:
        surfaces.append(shelf(rng, stage) if rng.random() < 0.5 else table(rng, stage))
    if rng.random() < 0.25:
        surfaces.append(wall_edge(rng, stage))
    cast = Cast([])
    for _ in range(int(rng.integers(1, 4))):
        size = body_size(rng, min(w, h), 0.05, 0.5)
        x = rng.uniform(0.1, 0.9) * w
        body = free(rng, str(rng.choice(FREE)), size, stage.look, stage.colour_at(x, h / 2))
        shape = body.shape
        top = min(float(s.p[1]) for s in surfaces)
        for _ in range(10):
            start = (x, rng.uniform(-0.4 * h, max(top - size, -0.3 * h)))
            if all(body_gap(shape, Still(*start), s, np.zeros(1))[0][0] > 1.0 for s in surfaces):
                break
            x = rng.uniform(0.1, 0.9) * w
        else:
            continue
        thrown = rng.random() < 0.4
        v0 = (
            (rng.uniform(-0.5, 0.5) * w, -rng.uniform(0, 0.7) * np.sqrt(g * h))
            if thrown
            else (0.0, 0.0)
        )
        motion, bounces = fall(
            shape,
            start,
            g=g,
            surfaces=surfaces,
            t_end=t_end,
            release_s=0.0 if rng.random() < 0.3 else rng.uniform(0.05, 0.6 * t_end),
            v0=v0,
            th0=rng.uniform(0, 2 * np.pi),
            spin=rng.uniform(-4, 4) if rng.random() < 0.5 else 0.0,
            restitution=rng.uniform(0.1, 0.8),
            friction=rng.uniform(0.2, 0.8),
            rng=rng,
        )
        actor = body.actor(motion)
        actor.real_size_m = shape.size / (g / 9.81)  # the size gravity's scale implies
        if stage.horizon is not None and rng.random() < 0.6:
            cast.actors.append(shadow(actor, float(floor.p[1]), rng))
        cast.actors.append(actor)
        cast.hits += [Hit(b.time_s, actor, b.surface, b.time_s) for b in bounces]
    return cast


def shadow(actor: Actor, floor_y: float, rng: np.random.Generator) -> Actor:
    """A soft dark ellipse on the floor under a body, fading as it rises."""
    size = max(actor.shape.size, 2.0)
    sprite = rasterise([(ellipse(0, 0, size / 2, max(size / 8, 0.8)), Paint((0.0, 0.0, 0.0)))])
    alpha = cv2.GaussianBlur(sprite.rgba[..., 3], (0, 0), max(size / 16, 0.5))
    rgba = np.dstack([np.zeros((*alpha.shape, 3), np.float32), alpha])
    motion = Shadow(
        actor.motion,
        actor.shape,
        lambda x: np.full(np.shape(x), floor_y),
        rng.uniform(0.25, 0.6),
        size,
    )
    return Actor(actor.shape, Sprite(rgba, sprite.origin), motion, occludes=False)
