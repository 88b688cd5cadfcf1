"""Turn a physics trace into impacts (onsets of contact) and continuous contact tracks.

An impact starts at a step where a pair's solver force becomes non-zero after the pair has been
apart for at least `REJOIN_S`, or where, inside an ongoing contact, the force jumps from a quiet
level (a box landing on an edge and then slapping down on a face). Candidates whose impulse over
`IMPACT_WINDOW_S` is below `MIN_DELTA_V * reduced mass` are dropped: a resting body's contact
flickers in Bullet, and those micro re-contacts carry only the support force times a step.
"""

from __future__ import annotations

import math

import numpy as np

from engines.sim.physics import PhysicsTrace
from engines.sim.scene import SceneSpec
from engines.sim.types import GROUND, ContactTrack, Impact

IMPACT_WINDOW_S = 0.004
REJOIN_S = 0.004  # apart for less than this: the same contact continuing
MIN_DELTA_V = 0.12  # m/s: impulse threshold per kg of reduced mass (a ~1 mm drop)
SPIKE_DELTA_V = 0.3  # m/s: an in-contact step impulse this large after quiet is a new impact
SPIKE_QUIET_S = 0.01
ROLL_MAX_SLIDE = 0.08  # m/s: slower slip counts as rolling


def detect_impacts(trace: PhysicsTrace, spec: SceneSpec) -> list[Impact]:
    """All impacts of the trace, sorted by time."""
    impacts: list[Impact] = []
    for k, (a, b) in enumerate(trace.pairs):
        force = trace.normal_force[:, k]
        if not force.any():
            continue
        m_red = _reduced_mass(spec, a, b)
        for n in _onsets(force, trace.hz, m_red):
            impulse = float(force[n : n + _steps(IMPACT_WINDOW_S, trace.hz)].sum()) / trace.hz
            if impulse < MIN_DELTA_V * m_red:
                continue
            speed = _approach_speed(trace, k, n)
            time_s = _refine_time(trace, k, n, speed)
            for obj, other in ((a, b), (b, a)):
                if obj != GROUND:
                    impacts.append(_impact(spec, time_s, impulse, speed, obj, other))
    impacts.sort(key=lambda i: (i.time_s, i.object_id))
    return impacts


def contact_tracks(trace: PhysicsTrace, spec: SceneSpec) -> list[ContactTrack]:
    """Slide/roll speed and normal force of every pair that touches at some step."""
    tracks = []
    for k, (a, b) in enumerate(trace.pairs):
        force = trace.normal_force[:, k]
        if not force.any():
            continue
        touching = force > 0
        point, rows = trace.contact_point[:, k], slice(None)
        v_rel = _velocity_at(trace, a, point, rows) - _velocity_at(trace, b, point, rows)
        normal = trace.contact_normal[:, k]
        v_tan = v_rel - np.sum(v_rel * normal, axis=1, keepdims=True) * normal
        slide = np.where(touching, np.linalg.norm(v_tan, axis=1), 0.0)
        roll = np.where(touching & (slide < ROLL_MAX_SLIDE), _roll_speed(trace, spec, a, b, k), 0.0)
        obj_a = spec.objects[a]
        tracks.append(
            ContactTrack(
                object_id=a,
                other_id=b,
                material=obj_a.material,
                other_material=_material(spec, b),
                size_m=obj_a.size_m,
                shape=obj_a.shape,
                time_s=trace.times_s,
                slide_speed=slide,
                roll_speed=roll,
                normal_force=force.copy(),
            )
        )
    return tracks


def _steps(seconds: float, hz: int) -> int:
    return max(1, math.ceil(seconds * hz - 1e-9))


def _onsets(force: np.ndarray, hz: int, m_red: float) -> list[int]:
    """Steps where a contact begins: after REJOIN_S apart, or a force spike after quiet."""
    rejoin, quiet = _steps(REJOIN_S, hz), _steps(SPIKE_QUIET_S, hz)
    spike = SPIKE_DELTA_V * m_red * hz  # as a force over one step
    onsets: list[int] = []
    last_touch = -(10**9)
    for n in np.nonzero(force > 0)[0]:
        n = int(n)
        recent = onsets[-1] if onsets else -(10**9)
        new = n - last_touch > rejoin
        if not new and force[n] >= spike and n - recent > quiet:
            new = bool(force[max(0, n - quiet) : n].max() < 0.25 * force[n])
        if new:
            onsets.append(n)
        last_touch = n
    return onsets


def _reduced_mass(spec: SceneSpec, a: int, b: int) -> float:
    ma = spec.objects[a].mass_kg
    if b == GROUND:
        return ma
    mb = spec.objects[b].mass_kg
    return ma * mb / (ma + mb)


def _velocity_at(trace: PhysicsTrace, obj: int, point: np.ndarray, rows: slice | int) -> np.ndarray:
    """Velocity of the material point of `obj` at `point` (the ground does not move)."""
    if obj == GROUND:
        return np.zeros_like(point)
    lever = point - trace.positions[rows, obj]
    return trace.linear_velocity[rows, obj] + np.cross(trace.angular_velocity[rows, obj], lever)


def _approach_speed(trace: PhysicsTrace, k: int, n: int) -> float:
    """Normal closing speed at the contact point, from the velocities before step n."""
    a, b = trace.pairs[k]
    point = trace.contact_point[n, k]
    v_rel = _velocity_at(trace, a, point, n - 1) - _velocity_at(trace, b, point, n - 1)
    # The normal points from b to a, so a approaching b has a negative normal velocity.
    return max(0.0, -float(v_rel @ trace.contact_normal[n, k]))


def _refine_time(trace: PhysicsTrace, k: int, n: int, speed: float) -> float:
    """Sub-step contact time. The gap reported at step n was measured at t_{n-1}; the surfaces
    met gap / speed later (earlier when they already overlap). Clamped to [t_{n-2}, t_n], >= 0."""
    dt = 1.0 / trace.hz
    t_prev = trace.times_s[n - 1]
    gap = trace.distance[n, k]
    if not np.isfinite(gap) or speed < 0.05:
        return float(t_prev)
    return float(np.clip(t_prev + gap / speed, max(0.0, t_prev - dt), t_prev + dt))


def _roll_speed(trace: PhysicsTrace, spec: SceneSpec, a: int, b: int, k: int) -> np.ndarray:
    """|relative angular velocity about the tangent plane| * rolling radius, for round a or b."""
    roller = a if spec.objects[a].round else (b if b != GROUND and spec.objects[b].round else None)
    if roller is None:
        return np.zeros(len(trace.times_s))
    w_rel = trace.angular_velocity[:, a] - (0.0 if b == GROUND else trace.angular_velocity[:, b])
    normal = trace.contact_normal[:, k]
    w_tan = w_rel - np.sum(w_rel * normal, axis=1, keepdims=True) * normal
    radius = np.linalg.norm(trace.contact_point[:, k] - trace.positions[:, roller], axis=1)
    return np.linalg.norm(w_tan, axis=1) * radius


def _material(spec: SceneSpec, obj: int) -> str:
    return spec.surface if obj == GROUND else spec.objects[obj].material


def _impact(
    spec: SceneSpec, time_s: float, impulse: float, speed: float, obj: int, other: int
) -> Impact:
    o = spec.objects[obj]
    return Impact(
        time_s=time_s,
        impulse_ns=impulse,
        speed_mps=speed,
        object_id=obj,
        other_id=other,
        material=o.material,
        other_material=_material(spec, other),
        size_m=o.size_m,
        shape=o.shape,
    )
