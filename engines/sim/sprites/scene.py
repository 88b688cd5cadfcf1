"""What one shot contains: bodies with their motions, the lines they can hit, and the contacts.

Scene coordinates are the picture's pixels when the camera is at rest (x right, y down); the
camera (`camera.Camera`) maps them into the picture at each time. The background canvas covers
every scene point the camera shows, with canvas pixel (0, 0) at scene point `origin`.

A contact is a `Hit` between a body and a `Surface` (a line segment, fixed or carried by another
body). Its time is exact: a knot of the body's motion, or a root of the gap solved to 1e-10 s.
`gap(actor, surface, t)` is the distance from the body's outline to the segment at any time,
which is how tests (and `clear`) check that a body touches exactly at its contact times.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engines.sim.sprites.camera import Camera
from engines.sim.sprites.kinematics import TH, Motion, rot
from engines.sim.sprites.shapes import Shape, Sprite

SPEED_DT = 1e-5  # step of the one-sided derivative that gives the closing speed


@dataclass(eq=False)
class Actor:
    shape: Shape
    sprite: Sprite
    motion: Motion
    material: str | None = None
    real_size_m: float | None = None  # what the body would measure: sets the audible speed
    occludes: bool = True  # hides what is behind it (a shadow does not)


@dataclass(frozen=True, eq=False)
class Surface:
    """A line through p with unit normal n pointing to the side bodies come from, limited to
    +-half_len along its tangent; p and n are in the frame of `parent` when it is set."""

    p: tuple[float, float]
    n: tuple[float, float]
    half_len: float = float("inf")
    parent: Motion | None = None

    def at(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, 2) points and normals in scene coordinates."""
        p = np.broadcast_to(np.asarray(self.p, np.float64), (len(t), 2))
        n = np.broadcast_to(np.asarray(self.n, np.float64), (len(t), 2))
        if self.parent is None:
            return p, n
        pose = self.parent.pose(t)
        r = rot(pose[:, TH])
        return pose[:, :2] + np.einsum("tij,tj->ti", r, p), np.einsum("tij,tj->ti", r, n)


@dataclass(frozen=True, eq=False)
class Hit:
    time_s: float
    actor: Actor
    surface: Surface
    until_s: float  # end of the contact (a dwell on the surface); == time_s for a bounce
    quiet: bool = False  # a contact nobody would hear (a bird landing): never required


@dataclass
class Cast:
    """What one scenario adds to a shot: bodies (back to front) and their contacts."""

    actors: list[Actor]
    hits: list[Hit] = field(default_factory=list)


@dataclass(frozen=True)
class Flow:
    """A region whose texture streams at constant velocity (water, a conveyor of noise)."""

    x0: float  # scene px of the region's top-left corner
    y0: float
    mask: np.ndarray  # (h, w) float32 in [0, 1]
    tile: np.ndarray  # (th, tw, 3) float32, periodic
    vx: float
    vy: float


@dataclass(frozen=True)
class Rain:
    """Streaks falling in picture coordinates (in front of everything)."""

    x: np.ndarray  # (D,) px at t = 0
    y: np.ndarray
    speed: np.ndarray  # (D,) px/s
    slant: float  # dx/dy
    length: float  # px, the streak at zero exposure
    rgb: tuple[float, float, float]
    opacity: float


@dataclass(frozen=True)
class Light:
    gain: np.ndarray | None  # (h, w) float32 in picture px, or none for flat light
    flicker: tuple[tuple[float, float, float], ...] = ()  # (amp, hz, phase) on global gain

    def level(self, t: float) -> float:
        return 1.0 + sum(a * np.sin(2 * np.pi * hz * t + ph) for a, hz, ph in self.flicker)


@dataclass(eq=False)
class Shot:
    canvas: np.ndarray  # (Hc, Wc, 3) float32 background, display values (may exceed 1)
    origin: tuple[float, float]
    actors: list[Actor]  # in drawing order, back to front
    hits: list[Hit]
    camera: Camera
    light: Light
    flows: list[Flow] = field(default_factory=list)
    rain: Rain | None = None


def gap(actor: Actor, surface: Surface, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance (T,) from the body to the surface segment at times t, and the body's point
    nearest the line (T, 2), scene px. Negative inside the line; past the segment's ends it is
    the (positive) distance to the segment."""
    return body_gap(actor.shape, actor.motion, surface, t)


def body_gap(
    shape: Shape, motion: Motion, surface: Surface, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`gap` for a shape and motion that are not (yet) an actor."""
    t = np.atleast_1d(np.asarray(t, np.float64))
    pose = motion.pose(t)
    p, n = surface.at(t)
    r = rot(pose[:, TH])
    h, s_body = shape.support(np.einsum("tji,tj->ti", r, -n))
    point = pose[:, :2] + np.einsum("tij,tj->ti", r, s_body)
    normal = np.einsum("ti,ti->t", n, pose[:, :2] - p) - h
    along = np.einsum("ti,ti->t", point - p, np.stack([n[:, 1], -n[:, 0]], axis=1))
    off = np.maximum(np.abs(along) - surface.half_len, 0.0)
    return np.where(off > 0, np.hypot(np.maximum(normal, 0.0), off), normal), point


def closing_speed(hit: Hit) -> float:
    """Speed (px/s) at which the gap closed just before the contact."""
    g0, _ = gap(hit.actor, hit.surface, np.array([hit.time_s - SPEED_DT, hit.time_s]))
    return float(max(g0[0] - g0[1], 0.0) / SPEED_DT)


def clear(
    actor: Actor,
    surface: Surface,
    hits: list[Hit],
    t0: float,
    t1: float,
    rests: list[tuple[float, float]] | tuple = (),
) -> bool:
    """Whether the body comes near the surface (0.05 px) only around its hits (30 ms either side
    of the contact and its dwell) and while it rests on it (`rests`: spans), in [t0, t1],
    sampled every 2 ms; the gap must be open 0.5 ms before each hit and closed at it."""
    t = np.arange(t0, t1, 0.002)
    g, _ = gap(actor, surface, t)
    own = [h for h in hits if h.actor is actor and h.surface is surface]
    allowed = np.zeros(len(t), bool)
    for a, b in [(h.time_s, h.until_s) for h in own] + list(rests):
        allowed |= (t >= a - 0.03) & (t <= b + 0.03)
    if np.any((g < 0.05) & ~allowed):
        return False
    if not own:
        return True
    before, _ = gap(actor, surface, np.array([h.time_s - 5e-4 for h in own]))
    at, _ = gap(actor, surface, np.array([h.time_s for h in own]))
    return bool(np.all(before > 0) and np.all(np.abs(at) < 1e-3))


def landings(actor: Actor, surface: Surface, gap_track, t_end: float, quiet: bool = False):
    """Hits where a gap track lands on 0 at speed inside (0, t_end), each lasting until the body
    lifts off, and every span it rests on the surface."""
    spans = gap_track.zero_spans()
    hits = [
        Hit(a, actor, surface, min(b, t_end), quiet) for a, b, hit in spans if hit and 0 < a < t_end
    ]
    return hits, [(a, b) for a, b, _ in spans]
