"""Training and evaluation clips: simulated video at model resolution + 48 kHz sound + ground truth.

    make_clip(seed, duration_s=..., fps=...) -> ClipRecord
    write_dataset(out_dir, n_clips=..., seed=...) -> list[Path]     (one .npz per clip)
    load_clip(path) -> ClipRecord

Frames reach the model the way a decoded video's would: rendered at a small 16:9 or 4:3 size,
then `service.media.frames.rgb_as_decoded` (yuv420p round trip, the decoder's scaler).
Clip i of a dataset is a pure function of (seed, i, holdout): workers can run in any order.

CLI: python -m engines.data.dataset --out data/train --n 600 --seed 0 [--holdout]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from engines.audio import synthesize
from engines.sim import SimClip, scene_from_seed, simulate
from engines.sim.materials import MATERIAL_NAMES, material
from engines.sim.scene import SHAPES
from engines.sim.simulate import screen_track
from engines.sim.types import Impact
from service.media.frames import FrameScaler, rgb_as_decoded

log = logging.getLogger(__name__)

SAMPLE_RATE = 48000
TRACK_HZ = 100
# Scenes render at 16:9 or 4:3, a little larger than the model input (as videos are), and are
# scaled to the model's square input the way the decoder scales a video.
ASPECTS = (16 / 9, 4 / 3)
MODEL_SIZE = 96


def render_size(model_size: int, aspect: float) -> tuple[int, int]:
    """Render (width, height) for a model input of model_size x model_size pixels."""
    height = 2 * round(model_size * 9 / 16)
    return 2 * round(height * aspect / 2), height


IMPACT_DTYPE = np.dtype(
    [
        ("time_s", "f8"),
        ("impulse_ns", "f4"),
        ("speed_mps", "f4"),
        ("material", "i2"),
        ("other_material", "i2"),
        ("size_m", "f4"),
        ("shape", "i1"),
        ("object_id", "i1"),
        ("other_id", "i1"),
    ]
)


@dataclass
class ClipRecord:
    """One clip as stored. Material ids index `engines.sim.materials.MATERIALS`; shape ids
    index `engines.sim.scene.SHAPES`. P = contact pairs that ever touch, T = TRACK_HZ bins."""

    seed: int
    kind: str
    holdout: bool
    fps: float
    fps_num: int  # fps as an exact fraction (30000/1001 for 29.97)
    fps_den: int
    duration_s: float
    render_width: int
    render_height: int
    frames: np.ndarray  # (N, model_h, model_w, 3) uint8, frame k at times_s[k] = k / fps
    times_s: np.ndarray  # (N,) float64
    sample_rate: int
    audio: np.ndarray  # (round(duration_s * sample_rate),) float32, sample 0 = frame 0
    impacts: np.ndarray  # (I,) IMPACT_DTYPE, sorted by time
    track_times_s: np.ndarray  # (T,) float64, start of each 1/TRACK_HZ bin
    slide_speed: np.ndarray  # (P, T) float32, max over the bin (m/s)
    roll_speed: np.ndarray  # (P, T) float32, max over the bin (m/s)
    normal_force: np.ndarray  # (P, T) float32, max over the bin (N)
    track_material: np.ndarray  # (P,) int16
    track_other_material: np.ndarray  # (P,) int16
    # (N, O, 2) float32: each object's centre in frame k, in normalised device coordinates of
    # the rendered frame (x right, y up, [-1, 1] across it), NaN behind the camera. The model
    # frame is the rendered one scaled, so these are also its coordinates.
    screen_xy: np.ndarray


def make_clip(
    seed: int,
    *,
    duration_s: float,
    fps: float | Fraction,
    model_width: int = MODEL_SIZE,
    model_height: int = MODEL_SIZE,
    render_width: int | None = None,
    render_height: int | None = None,
    holdout: bool = False,
    kind: str | None = None,
) -> ClipRecord:
    """Simulate, render, synthesise and convert the scene of `seed`. When the render size is not
    given, one of ASPECTS is picked from the seed."""
    if (render_width is None) != (render_height is None):
        raise ValueError("give both render_width and render_height, or neither")
    if render_width is None or render_height is None:
        pick = int(np.random.default_rng([seed, 5]).integers(len(ASPECTS)))
        render_width, render_height = render_size(max(model_width, model_height), ASPECTS[pick])
    spec = scene_from_seed(seed, kind=kind, holdout=holdout)
    clip = simulate(spec, duration_s=duration_s, fps=fps, width=render_width, height=render_height)
    audio = synthesize(clip, sample_rate=SAMPLE_RATE, seed=seed)
    scaler = FrameScaler(model_width, model_height)
    frames = np.stack([rgb_as_decoded(f, scaler) for f in clip.frames])
    return ClipRecord(
        seed=seed,
        kind=spec.kind,
        holdout=holdout,
        fps=float(clip.fps),
        fps_num=clip.fps.numerator,
        fps_den=clip.fps.denominator,
        duration_s=clip.duration_s,
        render_width=render_width,
        render_height=render_height,
        frames=frames,
        times_s=clip.times_s,
        sample_rate=SAMPLE_RATE,
        audio=audio,
        impacts=impact_array(clip),
        **_track_arrays(clip),
        screen_xy=clip.screen_xy,
    )


def impact_array(clip: SimClip) -> np.ndarray:
    """The clip's impacts as a structured (I,) IMPACT_DTYPE array."""
    rows = [
        (
            i.time_s,
            i.impulse_ns,
            i.speed_mps,
            material(i.material).id,
            material(i.other_material).id,
            i.size_m,
            SHAPES.index(i.shape),
            i.object_id,
            i.other_id,
        )
        for i in clip.impacts
    ]
    return np.array(rows, dtype=IMPACT_DTYPE)


def impacts_of(impacts: np.ndarray) -> list[Impact]:
    """`impact_array`'s inverse: the stored (I,) IMPACT_DTYPE rows as Impacts."""
    return [
        Impact(
            time_s=float(row["time_s"]),
            impulse_ns=float(row["impulse_ns"]),
            speed_mps=float(row["speed_mps"]),
            object_id=int(row["object_id"]),
            other_id=int(row["other_id"]),
            material=MATERIAL_NAMES[int(row["material"])],
            other_material=MATERIAL_NAMES[int(row["other_material"])],
            size_m=float(row["size_m"]),
            shape=SHAPES[int(row["shape"])],
        )
        for row in impacts
    ]


def _track_arrays(clip: SimClip) -> dict[str, np.ndarray]:
    """Contact tracks max-pooled from the physics rate into 1/TRACK_HZ bins (a 2 ms contact
    still shows in its bin)."""
    n_bins = round(clip.duration_s * TRACK_HZ)
    out: dict[str, list[np.ndarray]] = {"slide_speed": [], "roll_speed": [], "normal_force": []}
    for track in clip.tracks:
        rows = np.searchsorted(track.time_s, np.arange(n_bins) / TRACK_HZ)
        rows = np.minimum(rows, len(track.time_s) - 1)
        for name in out:
            out[name].append(np.maximum.reduceat(getattr(track, name), rows))
    arrays = {
        name: (np.stack(v) if v else np.zeros((0, n_bins))).astype(np.float32)
        for name, v in out.items()
    }
    return {
        **arrays,
        "track_times_s": np.arange(n_bins) / TRACK_HZ,
        "track_material": np.array([material(t.material).id for t in clip.tracks], np.int16),
        "track_other_material": np.array(
            [material(t.other_material).id for t in clip.tracks], np.int16
        ),
    }


def save_clip(path: Path, record: ClipRecord) -> None:
    np.savez_compressed(
        path, **{f.name: np.asarray(getattr(record, f.name)) for f in fields(ClipRecord)}
    )


def load_clip(path: str | Path) -> ClipRecord:
    with np.load(path) as z:
        values = {f.name: z[f.name] for f in fields(ClipRecord) if f.name in z.files}
    arrays = {
        "frames",
        "times_s",
        "audio",
        "impacts",
        "track_times_s",
        "slide_speed",
        "roll_speed",
        "normal_force",
        "track_material",
        "track_other_material",
        "screen_xy",
    }
    for name, v in values.items():
        if name not in arrays:
            values[name] = v.item()  # 0-d arrays back to Python scalars
    if "screen_xy" not in values:  # stored before clips recorded it: the physics is replayable
        values["screen_xy"] = _replay_screen_xy(values)
    return ClipRecord(**values)


def _replay_screen_xy(values: dict[str, Any]) -> np.ndarray:
    """`screen_xy` of a stored dataset clip (its kind drawn from its seed), replayed."""
    spec = scene_from_seed(int(values["seed"]), holdout=bool(values["holdout"]))
    if spec.kind != values["kind"]:
        raise ValueError(f"clip seed {values['seed']} does not replay to a {values['kind']} scene")
    return screen_track(
        spec,
        duration_s=float(values["duration_s"]),
        times_s=np.asarray(values["times_s"]),
        aspect=values["render_width"] / values["render_height"],
    )
    return screen_track(
        spec,
        duration_s=float(values["duration_s"]),  # type: ignore[arg-type]
        times_s=np.asarray(values["times_s"]),
        aspect=float(values["render_width"]) / float(values["render_height"]),  # type: ignore[arg-type]
    )


def clip_seed(seed: int, index: int, holdout: bool) -> int:
    """Seed of clip `index` of a dataset; train and holdout sets never share one."""
    return int(np.random.SeedSequence([seed, index, int(holdout)]).generate_state(1)[0])


@dataclass(frozen=True)
class _Job:
    out_dir: Path
    index: int
    seed: int
    duration_s: float
    fps_choices: tuple[float, ...]
    holdout: bool


def _write_one(job: _Job) -> dict[str, object]:
    seed = clip_seed(job.seed, job.index, job.holdout)
    path = job.out_dir / f"clip_{job.index:05d}.npz"
    if path.exists():  # clips are deterministic per (seed, index): a rerun only adds the missing
        record = load_clip(path)
    else:
        fps = job.fps_choices[int(np.random.default_rng([seed, 6]).integers(len(job.fps_choices)))]
        record = make_clip(seed, duration_s=job.duration_s, fps=fps, holdout=job.holdout)
        save_clip(path, record)
    return {
        "file": path.name,
        "seed": seed,
        "kind": record.kind,
        "fps": record.fps,
        "impacts": len(record.impacts),
        "peak": float(np.abs(record.audio).max()),
    }


def write_dataset(
    out_dir: str | Path,
    *,
    n_clips: int,
    seed: int,
    duration_s: float = 4.0,
    fps_choices: tuple[float, ...] = (24, 25, 30, 60),
    holdout: bool = False,
    workers: int = 2,
) -> list[Path]:
    """Write clips 0..n_clips-1 as `out_dir/clip_#####.npz` plus `manifest.json` (the options
    and a line per clip), over `workers` processes. Returns the clip paths in index order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [_Job(out, i, seed, duration_s, tuple(fps_choices), holdout) for i in range(n_clips)]
    start = time.perf_counter()
    rows: list[dict[str, object]] = []
    # spawn: the caller may hold threads (torch) or a physics client that fork would copy.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for row in pool.map(_write_one, jobs, chunksize=4):
            rows.append(row)
            if len(rows) % 50 == 0 or len(rows) == n_clips:
                log.info("%d/%d clips, %.0f s", len(rows), n_clips, time.perf_counter() - start)
    manifest = {
        "n_clips": n_clips,
        "seed": seed,
        "duration_s": duration_s,
        "fps_choices": list(fps_choices),
        "holdout": holdout,
        "sample_rate": SAMPLE_RATE,
        "materials": list(MATERIAL_NAMES),
        "shapes": list(SHAPES),
        "seconds": round(time.perf_counter() - start, 1),
        "clips": rows,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return [out / str(r["file"]) for r in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, required=True, help="number of clips")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per clip")
    parser.add_argument("--fps", type=float, nargs="+", default=[24, 25, 30, 60])
    parser.add_argument("--holdout", action="store_true", help="evaluation-only scenes")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.n < 1 or args.duration <= 0 or args.workers < 1:
        parser.error("--n, --duration and --workers must be positive")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    start = time.perf_counter()
    paths = write_dataset(
        args.out,
        n_clips=args.n,
        seed=args.seed,
        duration_s=args.duration,
        fps_choices=tuple(args.fps),
        holdout=args.holdout,
        workers=args.workers,
    )
    print(f"wrote {len(paths)} clips to {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
