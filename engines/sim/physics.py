"""Step a scene in Bullet at a fixed rate and record everything later stages need.

Deterministic: each call builds a fresh `p.DIRECT` world and issues the same commands in the same
order, which Bullet reproduces bit for bit. Each call owns its physics client; none is shared.

Step n (1-based) advances the world from t = (n-1)/hz to n/hz. Row n of every array in a
`PhysicsTrace` is the state after step n; row 0 is the initial state. Contact rows come from
`getContactPoints` after step n: `distance` is the gap measured at the *start* of step n (Bullet
detects collisions before it integrates) and `normal_force` is what the solver applied during
step n (force = impulse / dt).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pybullet as p

from engines.sim.materials import material
from engines.sim.scene import GRAVITY, ObjectSpec, SceneSpec
from engines.sim.types import GROUND

log = logging.getLogger(__name__)

PHYSICS_HZ = 480


@dataclass(frozen=True)
class PhysicsTrace:
    """States after each physics step. S = steps, O = objects, P = contact pairs.

    pairs: (a, b) object indices with a > b, b == GROUND (-1) for the floor; every object-ground
        pair and every object-object pair is present, touching or not.
    """

    hz: int
    times_s: np.ndarray  # (S+1,) float64, n / hz
    positions: np.ndarray  # (S+1, O, 3) float64, centre of mass
    orientations: np.ndarray  # (S+1, O, 4) float64 quaternions xyzw
    linear_velocity: np.ndarray  # (S+1, O, 3)
    angular_velocity: np.ndarray  # (S+1, O, 3)
    pairs: tuple[tuple[int, int], ...]
    normal_force: np.ndarray  # (S+1, P) N, summed over the pair's contact points; 0 = apart
    distance: np.ndarray  # (S+1, P) m, smallest gap of the pair (< 0: penetration); nan: none
    contact_point: np.ndarray  # (S+1, P, 3) force-weighted point on b
    contact_normal: np.ndarray  # (S+1, P, 3) unit, from b towards a


def run_physics(spec: SceneSpec, duration_s: float, hz: int = PHYSICS_HZ) -> PhysicsTrace:
    """Simulate `spec` for ceil(duration_s * hz) steps of 1/hz s."""
    steps = int(np.ceil(duration_s * hz - 1e-9))
    n_obj = len(spec.objects)
    client = p.connect(p.DIRECT)
    try:
        bodies = _build_world(spec, hz, client)
        pairs = tuple((a, b) for a in range(n_obj) for b in range(-1, a))
        rec = _Recorder(steps, n_obj, len(pairs))
        pair_index = {pair: i for i, pair in enumerate(pairs)}
        body_to_obj = {body: i for i, body in enumerate(bodies)}
        released = [o.release_s <= 0.0 for o in spec.objects]
        rec.state(0, bodies, client)
        for n in range(1, steps + 1):
            t_start = (n - 1) / hz
            for i, obj in enumerate(spec.objects):
                if not released[i] and t_start >= obj.release_s:
                    released[i] = True
                    p.resetBaseVelocity(
                        bodies[i], obj.linear_velocity, obj.angular_velocity, physicsClientId=client
                    )
            _hold(spec.objects, bodies, released, client)
            p.stepSimulation(physicsClientId=client)
            _hold(spec.objects, bodies, released, client)
            rec.state(n, bodies, client)
            rec.contacts(n, p.getContactPoints(physicsClientId=client), body_to_obj, pair_index)
    finally:
        p.disconnect(client)
    return rec.trace(hz, pairs)


def _build_world(spec: SceneSpec, hz: int, client: int) -> list[int]:
    p.setGravity(0, 0, -GRAVITY, physicsClientId=client)
    p.setTimeStep(1.0 / hz, physicsClientId=client)
    p.setPhysicsEngineParameter(
        numSolverIterations=50, deterministicOverlappingPairs=1, physicsClientId=client
    )
    plane = p.createCollisionShape(p.GEOM_PLANE, physicsClientId=client)
    ground = p.createMultiBody(0, plane, -1, physicsClientId=client)
    surface = material(spec.surface)
    p.changeDynamics(
        ground,
        -1,
        restitution=surface.restitution,
        lateralFriction=surface.lateral_friction,
        rollingFriction=surface.rolling_friction,
        physicsClientId=client,
    )
    return [_add_object(obj, client) for obj in spec.objects]


def _add_object(obj: ObjectSpec, client: int) -> int:
    r, _, hz = obj.half_extents
    if obj.shape == "sphere":
        shape = p.createCollisionShape(p.GEOM_SPHERE, radius=r, physicsClientId=client)
    elif obj.shape == "box":
        shape = p.createCollisionShape(
            p.GEOM_BOX, halfExtents=obj.half_extents, physicsClientId=client
        )
    elif obj.shape == "cylinder":
        shape = p.createCollisionShape(
            p.GEOM_CYLINDER, radius=r, height=2 * hz, physicsClientId=client
        )
    elif obj.shape == "capsule":  # Bullet's height is the cylinder part, caps excluded
        shape = p.createCollisionShape(
            p.GEOM_CAPSULE, radius=r, height=2 * (hz - r), physicsClientId=client
        )
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")
    body = p.createMultiBody(
        obj.mass_kg,
        shape,
        -1,
        basePosition=obj.position,
        baseOrientation=obj.orientation,
        physicsClientId=client,
    )
    m = material(obj.material)
    # Bullet's default damping (0.04) would slow free fall measurably; friction stops things.
    p.changeDynamics(
        body,
        -1,
        restitution=m.restitution,
        lateralFriction=m.lateral_friction,
        rollingFriction=m.rolling_friction,
        spinningFriction=m.rolling_friction,
        linearDamping=0.0,
        angularDamping=0.0,
        physicsClientId=client,
    )
    if obj.release_s <= 0.0:
        p.resetBaseVelocity(body, obj.linear_velocity, obj.angular_velocity, physicsClientId=client)
    return body


def _hold(
    objects: tuple[ObjectSpec, ...], bodies: list[int], released: list[bool], client: int
) -> None:
    """Pin not-yet-released objects at their initial pose, at rest."""
    for obj, body, free in zip(objects, bodies, released, strict=True):
        if not free:
            p.resetBasePositionAndOrientation(
                body, obj.position, obj.orientation, physicsClientId=client
            )
            p.resetBaseVelocity(body, (0, 0, 0), (0, 0, 0), physicsClientId=client)


class _Recorder:
    def __init__(self, steps: int, n_obj: int, n_pairs: int) -> None:
        rows = steps + 1
        self.pos = np.zeros((rows, n_obj, 3))
        self.orn = np.zeros((rows, n_obj, 4))
        self.lin = np.zeros((rows, n_obj, 3))
        self.ang = np.zeros((rows, n_obj, 3))
        self.force = np.zeros((rows, n_pairs))
        self.dist = np.full((rows, n_pairs), np.nan)
        self.point = np.zeros((rows, n_pairs, 3))
        self.normal = np.zeros((rows, n_pairs, 3))

    def state(self, n: int, bodies: list[int], client: int) -> None:
        for i, body in enumerate(bodies):
            self.pos[n, i], self.orn[n, i] = p.getBasePositionAndOrientation(
                body, physicsClientId=client
            )
            self.lin[n, i], self.ang[n, i] = p.getBaseVelocity(body, physicsClientId=client)

    def contacts(
        self,
        n: int,
        points: tuple,
        body_to_obj: dict[int, int],
        pair_index: dict[tuple[int, int], int],
    ) -> None:
        by_pair: dict[int, list[tuple]] = {}
        for cp in points:
            a, b = body_to_obj.get(cp[1], GROUND), body_to_obj.get(cp[2], GROUND)
            sign = 1.0
            if a < b:  # normal (cp[7]) points from B to A; keep it pointing to the higher index
                a, b, sign = b, a, -1.0
            by_pair.setdefault(pair_index[(a, b)], []).append((cp, sign))
        for k, cps in by_pair.items():
            forces = np.array([max(cp[9], 0.0) for cp, _ in cps])
            weights = forces / forces.sum() if forces.sum() > 0 else np.full(len(cps), 1 / len(cps))
            # The point on the pair's lower-index body: cp[6] (on B) unless we swapped.
            points_b = np.array([cp[6] if s > 0 else cp[5] for cp, s in cps])
            normals = np.array([np.multiply(cp[7], s) for cp, s in cps])
            normal = weights @ normals
            self.force[n, k] = forces.sum()
            self.dist[n, k] = min(cp[8] for cp, _ in cps)
            self.point[n, k] = weights @ points_b
            self.normal[n, k] = normal / max(np.linalg.norm(normal), 1e-12)

    def trace(self, hz: int, pairs: tuple[tuple[int, int], ...]) -> PhysicsTrace:
        times = np.arange(self.pos.shape[0]) / hz
        return PhysicsTrace(
            hz=hz,
            times_s=times,
            positions=self.pos,
            orientations=self.orn,
            linear_velocity=self.lin,
            angular_velocity=self.ang,
            pairs=pairs,
            normal_force=self.force,
            distance=self.dist,
            contact_point=self.point,
            contact_normal=self.normal,
        )
