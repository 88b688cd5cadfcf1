"""Two bodies meeting in the air: a bat or racket swung smoothly through a ball, which reverses
abruptly at the contact (a tennis serve seen from afar, a batted pitch).

The racket's swing is one `smooth` segment, fastest at its midpoint, where the contact is put.
The ball is placed touching the racket's face there, arriving along a parabola and leaving with
the face's velocity plus its reflected relative velocity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.sim.sprites.bodies import free, tool
from engines.sim.sprites.kinematics import Pivot, Track, poses, rot
from engines.sim.sprites.scene import Cast, Hit, Surface, clear
from engines.sim.sprites.stage import Stage
from engines.sim.sprites.textures import body_size


@dataclass(frozen=True)
class Arc:
    """A ball through c at time tc: velocity v_in before, v_out after, constant acceleration g."""

    tc: float
    c: tuple[float, float]
    v_in: tuple[float, float]
    v_out: tuple[float, float]
    g: tuple[float, float]
    spin: float

    def pose(self, t: np.ndarray) -> np.ndarray:
        tau = np.asarray(t, np.float64)[:, None] - self.tc
        v = np.where(tau < 0, np.asarray(self.v_in), np.asarray(self.v_out))
        xy = np.asarray(self.c) + v * tau + 0.5 * np.asarray(self.g) * tau**2
        return poses(xy[:, 0], xy[:, 1], self.spin * tau[:, 0])


def rally(rng: np.random.Generator, stage: Stage, t_end: float) -> Cast:
    w, h = stage.size
    kind = str(rng.choice(["racket", "bat"]))
    length = body_size(rng, min(w, h), 0.15, 0.8)
    body = tool(rng, kind, length, stage.look, stage.colour_at(w / 2, h / 2))
    wrist = np.array([rng.uniform(0.2, 0.8) * w, rng.uniform(0.3, 0.9) * h])
    sweep = rng.choice([-1.0, 1.0]) * rng.uniform(1.5, 3.0)
    th = Track(0, rng.uniform(-np.pi, np.pi))
    racket = Pivot(Track(0, wrist[0]), Track(0, wrist[1]), th)
    actors = [body.actor(racket)]
    hits: list[Hit] = []
    t = rng.uniform(0.2, 1.0)
    while t < t_end - 0.1:
        dur = rng.uniform(0.15, 0.5)
        a0 = th.end[1]
        th.hold(t - dur / 2).to(t + dur / 2, a0 + sweep, "smooth")
        ball = _ball(rng, stage, body, racket, t, a0 + sweep / 2, sweep * np.pi / (2 * dur), length)
        if ball is not None:
            actor, face = ball
            hit = Hit(t, actor, face, t)
            if clear(actor, face, [hit], 0.0, t_end):
                actors.append(actor)
                hits.append(hit)
        back = rng.uniform(0.4, 1.2)
        th.to(t + dur / 2 + back, a0 + rng.uniform(-0.3, 0.3), "smooth")
        t += dur / 2 + back + rng.uniform(0.3, 1.0)
    return Cast(actors, hits)


def _ball(
    rng, stage: Stage, body, racket: Pivot, tc: float, thc: float, omega: float, length: float
):
    """A ball that meets the racket's face at tc, or None when the geometry does not work."""
    shape = body.shape
    for sigma in (1.0, -1.0):
        _, tip = shape.support(np.array([[0.0, sigma]]))
        p_face = tip[0]
        n = rot(thc) @ np.array([0.0, sigma])
        v_face = omega * (rot(thc + np.pi / 2) @ p_face)
        if n @ v_face > 0:
            break
    else:
        return None
    face = Surface((float(p_face[0]), float(p_face[1])), (0.0, sigma), 0.12 * length, racket)
    wrist = np.array([racket.x(np.array([tc]))[0], racket.y(np.array([tc]))[0]])
    r = max(length * rng.uniform(0.03, 0.07), 1.0)
    centre = wrist + rot(thc) @ p_face + n * r
    if rng.random() < 0.5:  # tossed: near the top of its flight
        g = np.array([0.0, rng.uniform(300, 2000)])
        v_in = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.15, 0.05)]) * g[1]
    else:  # pitched at the racket
        g = np.array([0.0, rng.uniform(0, 800)])
        v_in = -n * rng.uniform(0.3, 1.2) * np.linalg.norm(v_face) + rng.normal(
            0, 0.2, 2
        ) * np.linalg.norm(v_face)
    closing = float(n @ (v_face - v_in))
    if closing <= 0:
        return None
    v_out = v_in + (1 + rng.uniform(0.5, 0.9)) * closing * n
    ball = free(rng, "ball", 2 * r, stage.look, stage.colour_at(*centre))
    motion = Arc(tc, tuple(centre), tuple(v_in), tuple(v_out), tuple(g), rng.uniform(-20, 20))
    return ball.actor(motion), face
