"""Per-object screen trajectories of simulated scenes, with per-interval contact labels.

A scene is simulated once (physics only, cached on disk under data/tracks/) and then "filmed" at
any frame timing by projecting the recorded poses, which is cheap (~0.1 ms a frame): the same
physics serves every frame rate, phase and noise draw.

Coordinates: a track is in pixels of the model frame, MODEL_SIZE = 192 x 108 (the 16:9 source
frame scaled to 192 px wide): x from the left edge, y down from the top edge. An object whose
centre is outside the frame (or behind the camera) has no detection there: NaN.

Labels, per object o and interval k = (t_k, t_k+1] (N frames -> N-1 intervals):
    label[k, o]   1  a contact of o happens in the interval that a viewer would see and hear:
                     heard alone (engines.eval.reference.heard_alone), o in view, and o's
                     on-screen motion changes by >= MIN_CHANGE_PX per frame in model pixels;
                  -1 don't care: some other contact of o (too small to see, inaudible, out of
                     view), or the neighbouring interval of a positive whose contact lies within
                     NEAR_EDGE of their shared frame (either interval's evidence is the same);
                  0  no contact.
    offset[k, o]  (t_c - t_k) / (t_k+1 - t_k) of the first positive contact in the interval,
                  in [0, 1]; NaN elsewhere.
    impulse[k, o] its normal impulse (N s; NaN for the start of a slide or roll, and elsewhere).
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pybullet as p

from engines.data.clips import variable_frame_times
from engines.eval.onsets import Reference
from engines.eval.reference import (
    Contact,
    contacts,
    heard_alone,
    in_view,
    motion_change_px,
    required_reference,
)
from engines.eval.scenes import FRAME_RATES
from engines.sim.contacts import contact_tracks, detect_impacts
from engines.sim.physics import PHYSICS_HZ, run_physics
from engines.sim.render import project_points
from engines.sim.scene import SceneSpec, scene_from_seed
from engines.sim.simulate import frame_count
from engines.sim.types import ContactTrack, Impact, SimClip

MODEL_SIZE = (192, 108)  # model frame (width, height), px
EVAL_SIZE = (320, 180)  # the sync evaluation's video size (engines.eval.sync): the reference's
SAMPLE_RATE = 48000
DURATION_S = 5.0
MIN_CHANGE_PX = 0.3  # model px per frame: VISIBLE_PX_PER_FRAME (0.5) at 320 px is 0.3 at 192
NEAR_EDGE = 0.1
CACHE_DIR = Path(__file__).resolve().parents[2] / "data" / "tracks"
CACHE_VERSION = 1
BLOCK = 50  # scenes per cache file
TRAIN_SEEDS_BELOW = 1_000_000
VARIANTS: tuple[str, ...] = ("scene", "static", "camera", "freefall")


@dataclass
class SceneRecord:
    """One simulated scene: physics at PHYSICS_HZ and its contacts, no camera run yet.

    variant: "scene" (the seed's own scene) or a control: "static" (a static scene, still
    camera), "camera" (the same under a moving camera), "freefall" (an object in flight), built
    as engines.eval.scenes.control_clip builds them.
    positions: (S+1, O, 3) float64, centres of mass, metres.
    found: every contact (engines.eval.reference.contacts); heard: (C,) bool, each one's sound
    alone is heard; impulse: (C,) float64 N s (the largest of an impact's, NaN for motion starts).
    impacts, tracks: the simulator's, for the exact reference (None when dropped to save space).
    """

    seed: int
    holdout: bool
    variant: str
    spec: SceneSpec
    duration_s: float
    positions: np.ndarray
    found: list[Contact]
    heard: np.ndarray
    impulse: np.ndarray
    impacts: list[Impact] | None
    tracks: list[ContactTrack] | None

    @property
    def kind(self) -> str:
        return self.spec.kind if self.variant == "scene" else self.variant


@dataclass
class FilmedTracks:
    """A scene filmed at one frame timing: N frames, O objects.

    times_s: (N,) float64; screen_xy: (N, O, 2) float32 NDC (as SimClip.screen_xy);
    pixels: (N, O, 2) float32 model px (module docstring), NaN where not detected;
    label, offset, impulse: (N-1, O) per interval (module docstring).
    """

    record: SceneRecord
    rate: str
    times_s: np.ndarray
    screen_xy: np.ndarray
    pixels: np.ndarray
    label: np.ndarray
    offset: np.ndarray
    impulse: np.ndarray


# --- scenes ----------------------------------------------------------------------------------


def scene_spec(seed: int, holdout: bool, variant: str) -> SceneSpec:
    """The scene of a seed, or the control of `variant` built from it (as control_clip does)."""
    if variant == "scene":
        return scene_from_seed(seed, holdout=holdout)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    spec = scene_from_seed(
        seed, kind="freefall" if variant == "freefall" else "static", holdout=holdout
    )
    if variant in ("static", "camera"):
        rng = np.random.default_rng([seed, 29])
        moving = variant == "camera"
        yaw_rate = float(rng.choice([-1, 1]) * rng.uniform(6, 15)) if moving else 0.0
        dolly = float(rng.uniform(-0.06, 0.06)) * spec.camera.distance if moving else 0.0
        spec = replace(
            spec, camera=replace(spec.camera, yaw_rate_dps=yaw_rate, distance_rate_mps=dolly)
        )
    return spec


def simulate_scene(
    seed: int, holdout: bool, variant: str = "scene", *, duration_s: float = DURATION_S
) -> SceneRecord:
    """Physics, contacts and their audibility of one scene (the audio seed is the scene's)."""
    spec = scene_spec(seed, holdout, variant)
    trace = run_physics(spec, duration_s, PHYSICS_HZ)
    impacts = detect_impacts(trace, spec)
    tracks = contact_tracks(trace, spec)
    clip = _sim_clip(spec, duration_s, impacts, tracks, np.zeros(0), np.zeros((0, 0, 2)), (1, 1))
    found = contacts(clip)
    heard = heard_alone(clip, found, SAMPLE_RATE, seed)
    impulse = np.array(
        [max((impacts[i].impulse_ns for i in c.impacts), default=math.nan) for c in found]
    )
    return SceneRecord(
        seed=seed,
        holdout=holdout,
        variant=variant,
        spec=spec,
        duration_s=duration_s,
        positions=trace.positions,
        found=found,
        heard=np.asarray(heard, bool),
        impulse=impulse,
        impacts=impacts,
        tracks=tracks,
    )


def load_scenes(
    seeds: Iterable[int],
    *,
    holdout: bool,
    variant: str = "scene",
    keep_tracks: bool = False,
    duration_s: float = DURATION_S,
    cache_dir: Path = CACHE_DIR,
    log_every: int = 0,
) -> list[SceneRecord]:
    """Scene records of `seeds`, simulated once and cached in blocks of BLOCK seeds (a block is
    simulated whole the first time any of its seeds is asked for). keep_tracks=False drops the
    simulator's impacts and tracks from the returned records (training needs only `found`)."""
    wanted = list(seeds)
    blocks: dict[int, dict[int, SceneRecord]] = {}
    out = []
    done = 0
    for seed in wanted:
        b = seed // BLOCK
        if b not in blocks:
            blocks[b] = _load_block(b, holdout, variant, duration_s, cache_dir)
            done += BLOCK
            if log_every and done % log_every < BLOCK:
                print(f"  scenes: {done} ({variant}, holdout={holdout})", flush=True)
        record = blocks[b][seed]
        out.append(record if keep_tracks else replace(record, impacts=None, tracks=None))
    return out


def _load_block(
    block: int, holdout: bool, variant: str, duration_s: float, cache_dir: Path
) -> dict[int, SceneRecord]:
    name = f"v{CACHE_VERSION}_{variant}_{'holdout' if holdout else 'fresh'}_{duration_s:g}s"
    path = cache_dir / name / f"{block * BLOCK:08d}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    records = {
        s: simulate_scene(s, holdout, variant, duration_s=duration_s)
        for s in range(block * BLOCK, (block + 1) * BLOCK)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(records, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)  # atomic: an interrupted run never leaves half a block
    return records


# --- filming ---------------------------------------------------------------------------------


def frame_times(
    rate: str, duration_s: float, seed: int, fps: Fraction | None = None
) -> list[Fraction]:
    """Exact frame times of a FRAME_RATES label (as engines.eval.scenes.film makes them; the
    variable rate draws its intervals from `seed`), or of `fps` when given (then `rate` ending
    in "v" makes it variable around `fps`)."""
    if fps is None:
        fps, variable = FRAME_RATES[rate]
    else:
        variable = rate.endswith("v")
    if variable:
        return variable_frame_times(duration_s, fps, seed)
    return [Fraction(k) / fps for k in range(frame_count(duration_s, fps))]


def sample_timing(rng: np.random.Generator) -> tuple[str, Fraction]:
    """A random native frame timing for training: a FRAME_RATES label half the time, else a
    constant or (one time in four) variable rate drawn log-uniformly from 23.976-60 fps.
    Returns (rate, fps) for `frame_times(rate, ..., fps=fps)`."""
    if rng.random() < 0.5:
        label = list(FRAME_RATES)[int(rng.integers(len(FRAME_RATES)))]
        fps, variable = FRAME_RATES[label]
        return ("v" if variable else "c"), fps
    fps = Fraction(math.exp(rng.uniform(math.log(23.976), math.log(60.0)))).limit_denominator(1001)
    return ("v" if rng.random() < 0.25 else "c"), fps


def film(record: SceneRecord, times: list[Fraction], rate: str = "") -> FilmedTracks:
    """Project `record` at `times` (exact, increasing, from 0) and label its intervals."""
    screen = project(record, times)
    times_s = np.array([float(t) for t in times])
    pixels = to_pixels(screen)
    label, offset, impulse = interval_labels(record, times_s, screen)
    return FilmedTracks(record, rate, times_s, screen, pixels, label, offset, impulse)


def project(record: SceneRecord, times: list[Fraction]) -> np.ndarray:
    """(N, O, 2) float32 NDC of the objects' centres at `times`, exactly as
    engines.sim.simulate records them (same pose interpolation, same matrices)."""
    aspect = EVAL_SIZE[0] / EVAL_SIZE[1]
    positions = record.positions
    last = len(positions) - 2
    client = p.connect(p.DIRECT)
    try:
        rows = []
        for t in times:
            s = t * PHYSICS_HZ  # as engines.sim.simulate.pose_at
            i = min(math.floor(s), last)
            f = float(s - i)
            pos = (1.0 - f) * positions[i] + f * positions[i + 1]
            rows.append(project_points(record.spec.camera, aspect, pos, float(t), client))
    finally:
        p.disconnect(client)
    return np.stack(rows).astype(np.float32)


def to_pixels(screen: np.ndarray) -> np.ndarray:
    """NDC (..., 2) -> model-frame pixels (x right from the left edge, y down from the top);
    NaN where the centre is outside the frame or behind the camera (no detection)."""
    w, h = MODEL_SIZE
    inside = (np.abs(screen) <= 1.0).all(axis=-1, keepdims=True)  # NaN compares False
    px = np.stack([(screen[..., 0] + 1.0) * (w / 2), (1.0 - screen[..., 1]) * (h / 2)], axis=-1)
    return np.where(inside, px, np.nan).astype(np.float32)


def interval_labels(
    record: SceneRecord, times_s: np.ndarray, screen: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(label, offset, impulse), each (N-1, O): see the module docstring."""
    n, n_obj = screen.shape[:2]
    label = np.zeros((n - 1, n_obj), np.int8)
    offset = np.full((n - 1, n_obj), np.nan, np.float32)
    impulse = np.full((n - 1, n_obj), np.nan, np.float32)
    clip = _sim_clip(
        record.spec, record.duration_s, [], [], times_s, screen, MODEL_SIZE
    )  # only times, positions and size are read by in_view / motion_change_px
    near: list[tuple[int, int, float]] = []
    for c, contact in enumerate(record.found):
        k = int(np.searchsorted(times_s, contact.time_s, side="left")) - 1  # t_k < t <= t_k+1
        if k < 0 or k >= n - 1:
            continue
        u = (contact.time_s - times_s[k]) / (times_s[k + 1] - times_s[k])
        for o in contact.objects:
            alone = replace(contact, objects=(o,))
            seen = (
                record.heard[c]
                and in_view(clip, alone)
                and motion_change_px(clip, alone) >= MIN_CHANGE_PX
            )
            if not seen:
                if label[k, o] == 0:
                    label[k, o] = -1
                continue
            if label[k, o] != 1 or u < offset[k, o]:
                label[k, o] = 1
                offset[k, o] = u
                impulse[k, o] = record.impulse[c]
            near.append((k, o, u))
    for k, o, u in near:  # a contact at a frame: its neighbour interval is as good
        j = k - 1 if u < NEAR_EDGE else k + 1 if u > 1.0 - NEAR_EDGE else -1
        if 0 <= j < n - 1 and label[j, o] == 0:
            label[j, o] = -1
    return label, offset, impulse


def sim_clip(record: SceneRecord, filmed: FilmedTracks) -> SimClip:
    """The SimClip `simulate` would have made at `filmed`'s times and EVAL_SIZE, without frames
    (engines.eval.reference reads only the frames' size): for `required_reference`."""
    if record.impacts is None or record.tracks is None:
        raise ValueError("the record's impacts and tracks were dropped: load with keep_tracks")
    return _sim_clip(
        record.spec,
        record.duration_s,
        record.impacts,
        record.tracks,
        filmed.times_s,
        filmed.screen_xy,
        EVAL_SIZE,
    )


def reference(record: SceneRecord, filmed: FilmedTracks) -> Reference:
    """The required-onset reference of the filmed clip at EVAL_SIZE (the sync evaluation's)."""
    return required_reference(sim_clip(record, filmed), sample_rate=SAMPLE_RATE, seed=record.seed)


def _sim_clip(
    spec: SceneSpec,
    duration_s: float,
    impacts: list[Impact],
    tracks: list[ContactTrack],
    times_s: np.ndarray,
    screen: np.ndarray,
    size: tuple[int, int],
) -> SimClip:
    frames = np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (len(times_s), size[1], size[0], 3))
    return SimClip(
        spec=spec,
        frames=frames,
        times_s=times_s,
        fps=Fraction(1),  # unread by the reference
        duration_s=float(duration_s),
        physics_hz=PHYSICS_HZ,
        impacts=impacts,
        tracks=tracks,
        screen_xy=screen,
    )


# --- augmentation ----------------------------------------------------------------------------


def augment(
    pixels: np.ndarray, rng: np.random.Generator, noise_px: float, drop_p: float = 0.0
) -> np.ndarray:
    """Detector noise: Gaussian `noise_px` (std per coordinate, model px) and, with probability
    `drop_p` per frame and object, a missed detection (NaN)."""
    out = pixels + rng.normal(0.0, noise_px, pixels.shape).astype(np.float32)
    if drop_p > 0:
        dropped = rng.random(pixels.shape[:-1]) < drop_p
        out[dropped] = np.nan
    return out


def reframe(
    pixels: np.ndarray,
    rng: np.random.Generator,
    zoom: tuple[float, float] = (0.75, 1.35),
    squash: tuple[float, float] = (0.6, 1.0),
) -> np.ndarray:
    """Another view of the same motion, roughly: the track scaled about the frame centre by a
    log-uniform `zoom` and its vertical axis further by `squash` (a steeper camera sees
    vertical motion foreshortened); what leaves the frame is not detected (NaN). Labels stay
    the original view's."""
    w, h = MODEL_SIZE
    z = float(np.exp(rng.uniform(np.log(zoom[0]), np.log(zoom[1]))))
    scale = np.array([z, z * float(rng.uniform(*squash))], np.float32)
    centre = np.array([w / 2, h / 2], np.float32)
    out = (pixels - centre) * scale + centre
    inside = (out[..., 0] >= 0) & (out[..., 0] <= w) & (out[..., 1] >= 0) & (out[..., 1] <= h)
    out[~inside] = np.nan
    return out


def stable_seed(*parts: object) -> int:
    """A seed from strings and numbers that does not change between runs (hash() does)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


# Cached by pickle: defined here, in a module no command runs as __main__, so the caches load
# whichever command made them.
@dataclass(frozen=True)
class TrainTrack:
    """One object's clean track at one timing: times (N,), pixels (N, 2), label (N-1,) int8,
    offset (N-1,), as `film` labels them."""

    times_s: np.ndarray
    pixels: np.ndarray
    label: np.ndarray
    offset: np.ndarray


@dataclass(frozen=True)
class ObservedTrack:
    """A real track and its labels: `track` (times, pixels, interval labels and contact
    times), per interval the contact's `impulse` (N s, NaN where none), per row the localiser's
    `radius` (px) and `materials` (probabilities); `obj`: the object it follows (-1: none)."""

    track: TrainTrack
    impulse: np.ndarray
    radius: np.ndarray
    materials: np.ndarray
    obj: int
    seed: int
