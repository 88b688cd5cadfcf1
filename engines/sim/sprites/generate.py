"""`sample_clip`: draw a format, one or two shots, render, deliver and label.

`plan_clip` draws everything (format, shots with their motions and contacts, delivery) without
rendering; `sample_clip` renders a plan. Both are deterministic in the seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.sim.sprites.clip import SpriteClip, SpriteContact
from engines.sim.sprites.degrade import (
    Delivery,
    deliver,
    h264_round_trip,
    noise_bank,
    sample_delivery,
)
from engines.sim.sprites.kinematics import TH, X, Y, rot
from engines.sim.sprites.render import render
from engines.sim.sprites.scenarios import KIND_WEIGHTS, KINDS, build_shot
from engines.sim.sprites.scene import Hit, Shot, closing_speed, gap

AUDIBLE_MPS = 0.25  # slower impacts are too quiet to require (with the body's implied scale)
MIN_SPEED_PX_S = 20.0  # slower than ~1 px a frame: the approach cannot be seen
MIN_SIZE_PX = 2.0
CUT_P = 0.12


@dataclass(frozen=True)
class Plan:
    seed: int
    kind: str
    duration_s: float
    fps: float
    times_s: np.ndarray
    shutter_s: float
    delivery: Delivery
    shots: tuple[Shot, ...]
    starts: tuple[int, ...]  # first frame of each shot
    offsets_s: tuple[float, ...]  # each shot's time 0 on the clip's timeline


def plan_clip(
    seed: int,
    *,
    kind: str | None = None,
    duration_s: float | None = None,
    size: tuple[int, int] | None = None,
    fps: float | None = None,
) -> Plan:
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    rng = np.random.default_rng(seed)
    fmt_rng, shot_rng, delivery_rng = rng.spawn(3)
    kind = kind or str(fmt_rng.choice(KINDS, p=[KIND_WEIGHTS[k] for k in KINDS]))
    duration = float(duration_s) if duration_s is not None else float(fmt_rng.uniform(2.0, 6.0))
    frame_size = tuple(size) if size is not None else _sample_size(fmt_rng)
    picture = _sample_picture(fmt_rng, frame_size)
    rate = float(fps) if fps is not None else _sample_fps(fmt_rng)
    times = _sample_times(fmt_rng, duration, rate)
    shutter = 0.0 if fmt_rng.random() < 0.15 else float(fmt_rng.uniform(0.1, 1.0)) / rate
    starts, offsets = [0], [0.0]
    if len(times) >= 8 and fmt_rng.random() < CUT_P:
        k = int(fmt_rng.integers(len(times) // 4, 3 * len(times) // 4))
        starts.append(k)
        offsets.append(float(times[k - 1] + times[k]) / 2)
    bounds = [*offsets[1:], duration]
    shots = tuple(
        build_shot(shot_rng, kind, end - start, picture[2:], rate)
        for start, end in zip(offsets, bounds, strict=True)
    )
    delivery = sample_delivery(delivery_rng, frame_size, picture)
    return Plan(
        seed, kind, duration, rate, times, shutter, delivery, shots, tuple(starts), tuple(offsets)
    )


def sample_clip(
    seed: int,
    *,
    kind: str | None = None,
    duration_s: float | None = None,
    size: tuple[int, int] | None = None,
    fps: float | None = None,
) -> SpriteClip:
    """A clip of `kind` (drawn when unset), deterministic in `seed`. `size` is (width, height)."""
    plan = plan_clip(seed, kind=kind, duration_s=duration_s, size=size, fps=fps)
    return render_plan(plan)


def render_plan(plan: Plan) -> SpriteClip:
    d = plan.delivery
    noise_rng = np.random.default_rng([plan.seed, 1])
    bank = noise_bank(noise_rng, d)
    frames = np.empty((len(plan.times_s), d.size[1], d.size[0], 3), np.uint8)
    ends = [*plan.starts[1:], len(plan.times_s)]
    for shot, start, end, offset in zip(plan.shots, plan.starts, ends, plan.offsets_s, strict=True):
        local = plan.times_s[start:end] - offset
        for i, picture in enumerate(render(shot, local, plan.shutter_s, d.picture[2:])):
            frames[start + i] = deliver(picture, d, bank, noise_rng)
    if d.h264_kbps is not None:
        frames = h264_round_trip(frames, d.h264_kbps, plan.fps)
    return SpriteClip(
        frames=frames,
        times_s=plan.times_s,
        duration_s=plan.duration_s,
        contacts=contacts(plan),
        cuts=tuple(plan.starts[1:]),
        kind=plan.kind,
        seed=plan.seed,
    )


def contacts(plan: Plan) -> tuple[SpriteContact, ...]:
    """Every contact of every shot inside its part of [0, duration), on the clip's timeline."""
    out = []
    ends = [*plan.offsets_s[1:], plan.duration_s]
    for s, shot in enumerate(plan.shots):
        for hit in shot.hits:
            t = hit.time_s + plan.offsets_s[s]
            if hit.time_s >= 0.0 and plan.offsets_s[s] <= t < ends[s]:
                out.append(_contact(plan, s, shot, hit, t))
    return tuple(sorted(out, key=lambda c: c.time_s))


def _contact(plan: Plan, s: int, shot: Shot, hit: Hit, t: float) -> SpriteContact:
    _, point = gap(hit.actor, hit.surface, np.array([hit.time_s]))
    m = shot.camera.matrices(np.array([hit.time_s]))[0]
    zoom = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    xp, yp = point[0] @ m[:, :2].T + m[:, 2]
    x0, y0, pw, ph = plan.delivery.picture
    speed = closing_speed(hit) * zoom
    size = hit.actor.shape.size * zoom
    audible = AUDIBLE_MPS * hit.actor.shape.size / (hit.actor.real_size_m or 1.0) * zoom
    required = (
        not hit.quiet
        and 0.0 <= xp <= pw - 1
        and 0.0 <= yp <= ph - 1
        and size >= MIN_SIZE_PX
        and speed >= max(audible, MIN_SPEED_PX_S)
        and not _hidden(shot, hit, point[0])
        and not _under_overlay(plan.delivery, xp + x0, yp + y0)
        and _bracketed(plan, s, t)
    )
    return SpriteContact(
        time_s=float(t),
        xy=(float(xp + x0), float(yp + y0)),
        speed_px_s=float(speed),
        size_px=float(size),
        material=hit.actor.material,
        required=bool(required),
    )


def _hidden(shot: Shot, hit: Hit, point: np.ndarray) -> bool:
    """Whether a body drawn in front of the hitting body covers the contact point."""
    t = np.array([hit.time_s])
    front = shot.actors[shot.actors.index(hit.actor) + 1 :]
    for actor in front:
        if not actor.occludes:
            continue
        pose = actor.motion.pose(t)[0]
        local = rot(pose[TH]).T @ (point - pose[[X, Y]])
        if actor.shape.contains(local[None])[0]:
            return True
    return False


def _under_overlay(d: Delivery, x: float, y: float) -> bool:
    if d.overlay is None:
        return False
    return bool(d.overlay[round(y), round(x), 3] > 127)


def _bracketed(plan: Plan, s: int, t: float) -> bool:
    """A frame of the same shot before (or at) t and one after it."""
    ends = [*plan.starts[1:], len(plan.times_s)]
    shot_times = plan.times_s[plan.starts[s] : ends[s]]
    return bool(shot_times[0] <= t < shot_times[-1])


def _sample_size(rng: np.random.Generator) -> tuple[int, int]:
    long = int(rng.integers(80, 201)) * 2
    aspect = float(rng.choice([4 / 3, 16 / 9, 1.0, 9 / 16], p=[0.25, 0.45, 0.1, 0.2]))
    w, h = (long, long / aspect) if aspect >= 1 else (long * aspect, long)
    return (round(w / 2) * 2, round(h / 2) * 2)


def _sample_picture(rng: np.random.Generator, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The picture inside the frame: all of it, or letterboxed / pillarboxed."""
    w, h = size
    if rng.random() > 0.12:
        return (0, 0, w, h)
    content = float(rng.choice([2.39, 1.85, 16 / 9, 4 / 3, 1.0]))
    if content > w / h:
        ph = round(w / content / 2) * 2
        return (0, (h - ph) // 2, w, ph)
    pw = round(h * content / 2) * 2
    return ((w - pw) // 2, 0, pw, h)


def _sample_fps(rng: np.random.Generator) -> float:
    roll = rng.random()
    if roll < 0.6:
        return float(rng.choice([24.0, 25.0, 30.0, 30000 / 1001]))
    if roll < 0.85:
        return float(rng.choice([15.0, 50.0, 60.0]))
    return float(rng.uniform(12, 60))


def _sample_times(rng: np.random.Generator, duration: float, fps: float) -> np.ndarray:
    """Frame times in [0, duration): regular, jittered (up to 20 % of the interval) or with
    dropped frames."""
    n = max(int(np.ceil(duration * fps - 1e-9)), 2)
    times = np.arange(n) / fps
    roll = rng.random()
    if roll < 0.15:
        times[1:] += rng.uniform(-0.2, 0.2, n - 1) / fps
    elif roll < 0.25:
        keep = rng.random(n) > rng.uniform(0.02, 0.15)
        keep[0] = keep[1] = True
        times = times[keep]
    return times[times < duration]
