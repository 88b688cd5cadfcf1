"""Random scenes: what is simulated and from where it is filmed.

`sample_scene(rng, kind=..., holdout=...)` draws a `SceneSpec` from a numpy Generator; the same
generator state gives the same scene. Units are SI (m, s, kg, rad/s), z is up, the ground is the
plane z = 0. An object can be held still until `release_s` (a hand letting go), which spreads
first impacts over the clip instead of all at t = 0.

Scenario kinds:
    drop      one object falls from 0.15-0.9 m and bounces
    roll      a sphere or cylinder launched sideways on (or just above) the ground rolls
    slide     a box launched on the ground slides to a stop
    multi     2-3 objects dropped or rolled at different times; they may hit each other
    static    1-3 objects resting on the ground; nothing moves (the camera may), no sound
    freefall  an object is tossed upwards and is in flight most of the clip; it lands late, if
              at all: motion without sound

Holdout (evaluation-only) rules: training never uses, and every holdout scene uses,
    - camera pitch in [-52, -40] degrees, a steeper top-down view (training: [-38, -8]);
    - objects that are either capsules (a shape training never sees; 3-16 cm) or training
      shapes in the size range 16-20 cm (training sizes: 3-16 cm).
Materials, surfaces and scenario kinds are shared: the model must know them to be judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from engines.sim.camera import CameraSpec, sample_camera
from engines.sim.materials import OBJECT_MATERIALS, SURFACE_MATERIALS, jitter_colour, material

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # x, y, z, w (Bullet's order)

SHAPES: tuple[str, ...] = ("sphere", "box", "cylinder", "capsule")
TRAIN_SHAPES: tuple[str, ...] = ("sphere", "box", "cylinder")
HOLDOUT_SHAPES: tuple[str, ...] = ("capsule",)
SCENE_KINDS: tuple[str, ...] = ("drop", "roll", "slide", "multi", "static", "freefall")
# Mostly sounding scenes, some silent ones so the model learns that motion alone makes no sound.
KIND_WEIGHTS: dict[str, float] = {
    "drop": 0.27,
    "roll": 0.17,
    "slide": 0.15,
    "multi": 0.25,
    "static": 0.07,
    "freefall": 0.09,
}
TRAIN_SIZE_M = (0.03, 0.16)
HOLDOUT_SIZE_M = (0.16, 0.20)
GRAVITY = 9.81
SHELL_FROM_M = 0.05


@dataclass(frozen=True)
class ObjectSpec:
    """One rigid body. `half_extents`: sphere (r, r, r); box (hx, hy, hz); cylinder and capsule
    (r, r, half of the full length along the local z axis, caps included)."""

    shape: str
    material: str
    half_extents: Vec3
    colour: Vec3
    position: Vec3
    orientation: Quat
    linear_velocity: Vec3
    angular_velocity: Vec3
    release_s: float = 0.0

    @property
    def size_m(self) -> float:
        """Largest extent (diameter or longest edge): what sets the pitch of the object."""
        return 2.0 * max(self.half_extents)

    @property
    def radius_m(self) -> float:
        return self.half_extents[0]

    @property
    def round(self) -> bool:
        """Can roll (its rolling speed is measured; a box tumbles instead)."""
        return self.shape in ("sphere", "cylinder", "capsule")

    @property
    def volume_m3(self) -> float:
        hx, hy, hz = self.half_extents
        if self.shape == "sphere":
            return 4.0 / 3.0 * math.pi * hx**3
        if self.shape == "box":
            return 8.0 * hx * hy * hz
        if self.shape == "cylinder":
            return math.pi * hx**2 * 2.0 * hz
        return math.pi * hx**2 * (2.0 * hz - 2.0 * hx) + 4.0 / 3.0 * math.pi * hx**3

    @property
    def mass_kg(self) -> float:
        """Density times volume, the volume thinned to a shell above `SHELL_FROM_M`: large
        household objects are hollow, so mass grows ~ size^2 there, not size^3 (a solid 16 cm
        ceramic cylinder would be 40 dB louder than a 3 cm one under impulse^0.8)."""
        shell = min(1.0, SHELL_FROM_M / self.size_m)
        return material(self.material).density * self.volume_m3 * shell


@dataclass(frozen=True)
class SceneSpec:
    kind: str
    holdout: bool
    objects: tuple[ObjectSpec, ...]
    surface: str
    surface_colour: Vec3
    camera: CameraSpec
    light_direction: Vec3
    texture_seed: int  # procedural floor texture


def sample_scene(
    rng: np.random.Generator, *, kind: str | None = None, holdout: bool = False
) -> SceneSpec:
    """A random scene of `kind` (drawn from KIND_WEIGHTS when None); see the module docstring."""
    if kind is None:
        kinds = list(KIND_WEIGHTS)
        p = np.array([KIND_WEIGHTS[k] for k in kinds])
        kind = kinds[int(rng.choice(len(kinds), p=p / p.sum()))]
    if kind not in SCENE_KINDS:
        raise ValueError(f"unknown scene kind {kind!r}; known: {', '.join(SCENE_KINDS)}")
    objects, roi = _SAMPLERS[kind](rng, holdout)
    surface = SURFACE_MATERIALS[int(rng.integers(len(SURFACE_MATERIALS)))]
    camera = sample_camera(
        rng, roi, max(o.size_m for o in objects), holdout, moving_p=0.5 if kind == "static" else 0.3
    )
    azimuth = rng.uniform(0, 2 * math.pi)
    elevation = rng.uniform(math.radians(45), math.radians(75))
    light = (
        math.cos(azimuth) * math.cos(elevation),
        math.sin(azimuth) * math.cos(elevation),
        math.sin(elevation),
    )
    return SceneSpec(
        kind=kind,
        holdout=holdout,
        objects=tuple(objects),
        surface=surface,
        surface_colour=jitter_colour(material(surface), rng),
        camera=camera,
        light_direction=light,
        texture_seed=int(rng.integers(2**31)),
    )


def scene_from_seed(seed: int, *, kind: str | None = None, holdout: bool = False) -> SceneSpec:
    """The scene of an integer seed: every entry point (dataset, video clips) agrees on it."""
    return sample_scene(np.random.default_rng(seed), kind=kind, holdout=holdout)


# --- objects ---------------------------------------------------------------------------------

_Roi = np.ndarray  # (K, 3) points the camera must see


def _shape_and_size(
    rng: np.random.Generator, holdout: bool, allowed: tuple[str, ...]
) -> tuple[str, float]:
    if not holdout:
        shapes = tuple(s for s in allowed if s in TRAIN_SHAPES)
        return shapes[int(rng.integers(len(shapes)))], _log_uniform(rng, *TRAIN_SIZE_M)
    if "capsule" in allowed and rng.random() < 0.5:
        return "capsule", _log_uniform(rng, *TRAIN_SIZE_M)
    shapes = tuple(s for s in allowed if s in TRAIN_SHAPES)
    return shapes[int(rng.integers(len(shapes)))], rng.uniform(*HOLDOUT_SIZE_M)


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _half_extents(rng: np.random.Generator, shape: str, size: float) -> Vec3:
    h = size / 2.0
    if shape == "sphere":
        return (h, h, h)
    if shape == "box":
        # Sorted so the smallest extent is z: a resting box lies on its largest face.
        a, b = sorted(rng.uniform(0.35, 1.0, 2) * h, reverse=True)
        return (h, float(a), float(b))
    if shape == "cylinder":
        if rng.random() < 0.5:  # tall: length is the size
            r = h * float(rng.uniform(0.3, 0.9))
            return (r, r, h)
        return (h, h, h * float(rng.uniform(0.3, 1.0)))  # squat: diameter is the size
    radius = h * float(rng.uniform(0.25, 0.5))  # capsule
    return (radius, radius, h)


def _new_object(
    rng: np.random.Generator, holdout: bool, allowed: tuple[str, ...] = SHAPES
) -> ObjectSpec:
    """A random object of an allowed shape, at the origin and at rest (callers place it)."""
    shape, size = _shape_and_size(rng, holdout, allowed)
    name = OBJECT_MATERIALS[int(rng.integers(len(OBJECT_MATERIALS)))]
    zero = (0.0, 0.0, 0.0)
    return ObjectSpec(
        shape=shape,
        material=name,
        half_extents=_half_extents(rng, shape, size),
        colour=jitter_colour(material(name), rng),
        position=zero,
        orientation=(0.0, 0.0, 0.0, 1.0),
        linear_velocity=zero,
        angular_velocity=zero,
    )


def _random_quat(rng: np.random.Generator) -> Quat:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return (float(q[0]), float(q[1]), float(q[2]), float(q[3]))


def _yaw_quat(yaw: float, lie_down: bool = False) -> Quat:
    """Rotation by `yaw` about z, after (if lie_down) turning the local z axis onto y."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    if not lie_down:
        return (0.0, 0.0, sy, cy)
    cx = sx = math.sqrt(0.5)  # 90 degrees about x
    return (cy * sx, sy * sx, sy * cx, cy * cx)


def _resting_height(obj: ObjectSpec, lie_down: bool) -> float:
    """Height of the centre when resting upright (or on its side when lie_down)."""
    r, _, hz = obj.half_extents
    return r if obj.shape == "sphere" or lie_down else hz


def _release(rng: np.random.Generator, p_now: float, hi: float) -> float:
    return 0.0 if rng.random() < p_now else float(rng.uniform(0.2, hi))


def _drop(
    rng: np.random.Generator, holdout: bool, xy: Vec3 = (0.0, 0.0, 0.0), release_hi: float = 1.5
) -> tuple[list[ObjectSpec], _Roi]:
    obj = _new_object(rng, holdout)
    height = float(rng.uniform(0.15, 0.9))
    vxy = rng.normal(0.0, 0.25, 2)
    pos = (
        xy[0] + float(rng.normal(0, 0.03)),
        xy[1] + float(rng.normal(0, 0.03)),
        height + obj.size_m / 2,
    )
    obj = replace(
        obj,
        position=pos,
        orientation=_random_quat(rng),
        linear_velocity=(float(vxy[0]), float(vxy[1]), 0.0),
        angular_velocity=tuple(float(w) for w in rng.normal(0.0, 3.0, 3)),
        release_s=_release(rng, 0.3, release_hi),
    )
    t_fall = math.sqrt(2 * height / GRAVITY)
    land = (pos[0] + vxy[0] * t_fall, pos[1] + vxy[1] * t_fall, 0.0)
    # Frame the landing, not the whole fall: at 64x64 a 3 cm object framed with a 1 m drop is
    # two pixels wide. The object falls into view from above, as in most real footage.
    seen_top = min(pos[2], 0.3 + obj.size_m)
    return [obj], np.array([(pos[0], pos[1], seen_top), land, (land[0], land[1], obj.size_m)])


def _launch(
    rng: np.random.Generator,
    holdout: bool,
    allowed: tuple[str, ...],
    speed: tuple[float, float],
    travel_s: float,
) -> tuple[list[ObjectSpec], _Roi]:
    """An object on (or up to 5 cm above) the ground launched horizontally, heading random."""
    obj = _new_object(rng, holdout, allowed)
    heading = rng.uniform(0, 2 * math.pi)
    direction = np.array([math.cos(heading), math.sin(heading), 0.0])
    v = float(rng.uniform(*speed))
    lie_down = obj.shape in ("cylinder", "capsule")
    # Axis of a lying cylinder perpendicular to the heading so it rolls straight.
    orientation = _yaw_quat(heading, lie_down) if obj.round else _yaw_quat(heading)
    ang = (0.0, 0.0, float(rng.normal(0, 1.0)))
    if obj.round:  # omega = spin * (z x v) / r: 1 rolls at once, 0 slides first
        spin = float(rng.uniform(0.0, 1.0))
        ang = tuple(float(a) for a in spin * np.cross([0, 0, 1], direction * v) / obj.radius_m)
    travel = min(v * travel_s, 1.2)
    framed = min(travel, 0.6)  # a long roll leaves the frame rather than shrink the object
    start = -direction * framed / 2 + np.append(rng.normal(0, 0.05, 2), 0.0)
    lift = float(rng.uniform(0.005, 0.05)) if rng.random() < 0.4 else 0.0
    start[2] = _resting_height(obj, lie_down) + lift
    obj = replace(
        obj,
        position=tuple(float(c) for c in start),
        orientation=orientation,
        linear_velocity=tuple(float(c) for c in direction * v),
        angular_velocity=ang,
        release_s=_release(rng, 0.4, 1.2),
    )
    end = start + direction * framed
    return [obj], np.array(
        [start, end, (start[0], start[1], obj.size_m), (end[0], end[1], obj.size_m)]
    )


def _roll(rng: np.random.Generator, holdout: bool) -> tuple[list[ObjectSpec], _Roi]:
    return _launch(rng, holdout, ("sphere", "cylinder", "capsule"), (0.3, 1.6), 2.0)


def _slide(rng: np.random.Generator, holdout: bool) -> tuple[list[ObjectSpec], _Roi]:
    return _launch(rng, holdout, ("box",), (0.6, 2.5), 0.6)


def _multi(rng: np.random.Generator, holdout: bool) -> tuple[list[ObjectSpec], _Roi]:
    n = int(rng.integers(2, 4))
    objects: list[ObjectSpec] = []
    rois = []
    angle0 = rng.uniform(0, 2 * math.pi)
    for i in range(n):
        angle = angle0 + 2 * math.pi * i / n
        spread = rng.uniform(0.08, 0.25)
        xy = (spread * math.cos(angle), spread * math.sin(angle), 0.0)
        if rng.random() < 0.75:
            objs, roi = _drop(rng, holdout, xy, release_hi=2.5)
        else:
            objs, roi = _roll(rng, holdout)
            o = objs[0]
            p = (o.position[0] + xy[0], o.position[1] + xy[1], o.position[2])
            objs = [replace(o, position=p)]
            roi = roi + np.array([xy[0], xy[1], 0.0])
        objects.extend(objs)
        rois.append(roi)
    return _separate(objects), np.concatenate(rois)


def _separate(objects: list[ObjectSpec]) -> list[ObjectSpec]:
    """Lift objects that would start interpenetrating (Bullet would explode them apart)."""
    placed: list[ObjectSpec] = []
    for obj in objects:
        pos = np.array(obj.position)
        for other in placed:
            gap = np.linalg.norm(pos - np.array(other.position))
            need = (obj.size_m + other.size_m) / 2 * 1.05
            if gap < need:
                pos[2] = max(pos[2], other.position[2] + need)
        placed.append(replace(obj, position=tuple(float(c) for c in pos)))
    return placed


def _static(rng: np.random.Generator, holdout: bool) -> tuple[list[ObjectSpec], _Roi]:
    n = int(rng.integers(1, 4))
    bodies = [_new_object(rng, holdout) for _ in range(n)]
    # Far enough apart that no two touch (3 objects on a circle: chord = spread * sqrt(3)).
    spread = 0.0 if n == 1 else max(o.size_m for o in bodies) + float(rng.uniform(0.02, 0.15))
    objects = []
    for i, obj in enumerate(bodies):
        lie_down = obj.shape == "capsule"  # a capsule cannot stand
        angle = 2 * math.pi * i / n + rng.uniform(0, 1)
        pos = (spread * math.cos(angle), spread * math.sin(angle), _resting_height(obj, lie_down))
        objects.append(
            replace(obj, position=pos, orientation=_yaw_quat(rng.uniform(0, 2 * math.pi), lie_down))
        )
    roi = np.array([o.position for o in objects] + [(0.0, 0.0, 0.25)])
    return objects, roi


def _freefall(rng: np.random.Generator, holdout: bool) -> tuple[list[ObjectSpec], _Roi]:
    obj = _new_object(rng, holdout)
    z0 = float(rng.uniform(0.3, 0.6))
    flight = float(rng.uniform(1.0, 1.6))  # s from release to landing
    # z0 + v t - g t^2 / 2 = 0 at t = flight
    v_up = (GRAVITY * flight**2 / 2 - z0) / flight
    apex = z0 + v_up**2 / (2 * GRAVITY)
    vxy = rng.normal(0.0, 0.1, 2)
    obj = replace(
        obj,
        position=(0.0, 0.0, z0),
        orientation=_random_quat(rng),
        linear_velocity=(float(vxy[0]), float(vxy[1]), v_up),
        angular_velocity=tuple(float(w) for w in rng.normal(0.0, 4.0, 3)),
        release_s=float(rng.uniform(0.5, 2.6)),
    )
    seen_top = min(apex, 0.5)  # it leaves the frame at the top and comes back
    return [obj], np.array([(0.0, 0.0, 0.0), (0.0, 0.0, seen_top), (*(vxy * flight), 0.0)])


_SAMPLERS = {
    "drop": _drop,
    "roll": _roll,
    "slide": _slide,
    "multi": _multi,
    "static": _static,
    "freefall": _freefall,
}
