"""Simulate a scene and film it: `SceneSpec` -> `SimClip` (frames + ground-truth contacts).

Physics runs first for the whole duration at `PHYSICS_HZ` (fixed step, deterministic); frames
are rendered afterwards from the recorded poses. Frame k shows time k / fps exactly: poses are
interpolated between the two physics steps around it (linear position, normalised-linear
rotation), so frame rates that do not divide the physics rate (25, 29.97) stay exact.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import numpy as np
import pybullet as p

from engines.sim.contacts import contact_tracks, detect_impacts
from engines.sim.physics import PHYSICS_HZ, PhysicsTrace, run_physics
from engines.sim.render import SceneRenderer, project_points
from engines.sim.scene import SceneSpec
from engines.sim.types import SimClip

log = logging.getLogger(__name__)


def as_fraction(x: float | Fraction) -> Fraction:
    """An exact rate or duration: Fractions pass through, floats snap to the nearest simple
    fraction (4.1 s is 41/10 s, not the binary float just below it)."""
    return x if isinstance(x, Fraction) else Fraction(x).limit_denominator(1_000_000)


def frame_count(duration_s: float | Fraction, fps: float | Fraction) -> int:
    """Frames whose time k / fps lies in [0, duration): ceil(duration * fps)."""
    return math.ceil(as_fraction(duration_s) * as_fraction(fps))


def simulate(
    spec: SceneSpec,
    *,
    duration_s: float,
    fps: float | Fraction,
    width: int,
    height: int,
    shadows: bool = False,
    physics_hz: int = PHYSICS_HZ,
    frame_times: list[Fraction] | None = None,
) -> SimClip:
    """Simulate `spec` for `duration_s` and render frames at t = k / fps, k = 0..N-1 with
    N = ceil(duration_s * fps), at width x height. Impacts and tracks cover [0, duration_s].
    `frame_times` (increasing, in [0, duration_s), the first 0) replaces the regular times: a
    variable frame rate, `fps` then being its nominal rate."""
    rate = as_fraction(fps)
    if rate <= 0 or duration_s <= 0:
        raise ValueError(f"fps and duration must be positive, got {fps}, {duration_s}")
    trace = run_physics(spec, duration_s, physics_hz)
    if frame_times is None:
        exact_times = [Fraction(k) / rate for k in range(frame_count(duration_s, rate))]
    else:
        exact_times = list(frame_times)
        steps = np.diff([float(t) for t in exact_times])
        if not exact_times or exact_times[0] != 0 or (steps <= 0).any():
            raise ValueError("frame_times must start at 0 and increase")
    n_frames = len(exact_times)
    frames = np.empty((n_frames, height, width, 3), np.uint8)
    screen = np.empty((n_frames, len(spec.objects), 2), np.float32)
    with SceneRenderer(spec, width, height, shadows=shadows) as renderer:
        for k, t in enumerate(exact_times):
            positions, orientations = pose_at(trace, t)
            frames[k] = renderer.render(positions, orientations, float(t))
            screen[k] = renderer.project(positions, float(t))
    clip = SimClip(
        spec=spec,
        frames=frames,
        times_s=np.array([float(t) for t in exact_times]),
        fps=rate,
        duration_s=float(duration_s),
        screen_xy=screen,
        physics_hz=physics_hz,
        impacts=detect_impacts(trace, spec),
        tracks=contact_tracks(trace, spec),
    )
    log.debug("simulated %s: %d frames, %d impacts", spec.kind, n_frames, len(clip.impacts))
    return clip


def pose_at(trace: PhysicsTrace, t: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """Object positions (O, 3) and orientations (O, 4) at time t, between physics steps."""
    s = t * trace.hz
    i = min(math.floor(s), len(trace.times_s) - 2)
    f = float(s - i)
    pos = (1.0 - f) * trace.positions[i] + f * trace.positions[i + 1]
    q0, q1 = trace.orientations[i], trace.orientations[i + 1]
    q1 = np.where(np.sum(q0 * q1, axis=1, keepdims=True) < 0, -q1, q1)  # shorter way round
    q = (1.0 - f) * q0 + f * q1
    return pos, q / np.linalg.norm(q, axis=1, keepdims=True)


def screen_track(
    spec: SceneSpec, *, duration_s: float, times_s: np.ndarray, aspect: float
) -> np.ndarray:
    """The objects' centres as filmed at `times_s`: (N, O, 2) normalised device coordinates,
    as `simulate` records them, without rendering (for clips stored before it recorded them)."""
    trace = run_physics(spec, duration_s, PHYSICS_HZ)
    client = p.connect(p.DIRECT)
    try:
        rows = [
            project_points(spec.camera, aspect, pose_at(trace, as_fraction(t))[0], t, client)
            for t in times_s.tolist()
        ]
    finally:
        p.disconnect(client)
    return np.stack(rows).astype(np.float32)


def simulate_unfilmed(spec: SceneSpec, *, duration_s: float) -> SimClip:
    """`simulate` without the camera: the contacts and tracks, no frames (for uses that need
    only the sound, at a fraction of the cost)."""
    trace = run_physics(spec, duration_s, PHYSICS_HZ)
    return SimClip(
        spec=spec,
        frames=np.zeros((0, 0, 0, 3), np.uint8),
        times_s=np.zeros(0),
        fps=Fraction(1),
        duration_s=float(duration_s),
        screen_xy=np.zeros((0, len(spec.objects), 2), np.float32),
        physics_hz=PHYSICS_HZ,
        impacts=detect_impacts(trace, spec),
        tracks=contact_tracks(trace, spec),
    )
