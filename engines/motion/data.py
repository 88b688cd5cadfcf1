"""The contact head's training set: generated clips through the service's preprocessing, cached
one file per clip so a build that stops resumes where it was.

    python -m engines.motion.data --source sprites|bullet --seeds 0:2000 [--workers 2]

`sprites` (engines.sim.sprites): fast procedural scenes of every look, strikes and swings,
drops, walkers, pans and cuts. `bullet` (engines.sim): rigid bodies dropped, rolled and slid,
rendered in 3D. Each lands in data/motion/<source>/ (`--out`); a file that exists is not made
again.
"""

from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
from pathlib import Path

import numpy as np

from engines.motion.features import (
    ClipFeatures,
    Contact,
    clip_features,
    letterbox_map,
    maps_path,
)
from service.pipeline.motion.flow import VELOCITY_DT_S

log = logging.getLogger(__name__)


def strength_of(speed_px_s: float, size_px: float, picture_scale: float) -> float:
    """A contact's log strength from what the picture shows of it: the closing speed (picture
    pixels per 1/30 s) and the body's size, as a momentum-like product."""
    speed = speed_px_s * picture_scale * VELOCITY_DT_S
    size = max(size_px * picture_scale, 1.0)
    return math.log1p(speed) + 0.5 * math.log(size)


def sprite_features(seed: int) -> ClipFeatures:
    from engines.sim.sprites import sample_clip

    clip = sample_clip(seed)
    scale, _, _ = letterbox_map(clip.frames.shape[2], clip.frames.shape[1])
    contacts = [
        Contact(c.time_s, c.xy, strength_of(c.speed_px_s, c.size_px, scale), c.material, c.required)
        for c in clip.contacts
    ]
    return clip_features(clip.frames, clip.times_s, tuple(clip.cuts), contacts)


BULLET_RATES = (12, 15, 24, 25, 30, 30, 50, 60)
BULLET_SIZES = ((320, 180), (240, 180), (320, 240), (180, 320))


def bullet_features(seed: int) -> ClipFeatures:
    """A pybullet scene of the training split (engines.sim.scene), filmed at a drawn rate
    and shape; contacts placed at their objects' centres on screen, required as the sync
    reference requires them (in view, visible, audible alone)."""
    from fractions import Fraction

    from engines.data.clips import variable_frame_times
    from engines.eval.reference import contacts, required_reference
    from engines.sim.scene import scene_from_seed
    from engines.sim.simulate import simulate

    rng = np.random.default_rng([seed, 71])
    fps = Fraction(int(rng.choice(BULLET_RATES)))
    width, height = BULLET_SIZES[int(rng.integers(len(BULLET_SIZES)))]
    duration = float(rng.uniform(2.5, 4.0))
    times = variable_frame_times(duration, fps, seed) if rng.random() < 0.2 else None
    spec = scene_from_seed(seed)
    clip = simulate(
        spec, duration_s=duration, fps=fps, width=width, height=height, frame_times=times
    )
    required = set(np.round(required_reference(clip, seed=seed).required, 9).tolist())
    scale, _, _ = letterbox_map(width, height)
    found = []
    for c in contacts(clip):
        k = int(np.clip(np.searchsorted(clip.times_s, c.time_s) - 1, 0, len(clip.times_s) - 2))
        f = (c.time_s - clip.times_s[k]) / (clip.times_s[k + 1] - clip.times_s[k])
        ndc = (1 - f) * clip.screen_xy[k, list(c.objects)] + f * clip.screen_xy[
            k + 1, list(c.objects)
        ]
        if not c.objects or not np.isfinite(ndc).all():
            continue
        x, y = ndc.mean(axis=0)
        xy = ((x + 1) / 2 * width, (1 - y) / 2 * height)
        impulses = [clip.impacts[i] for i in c.impacts]
        speed_mps = max((i.speed_mps for i in impulses), default=0.2)
        size_m = max((spec.objects[o].size_m for o in c.objects), default=0.1)
        # pixels per metre at the object: its size on screen over its size in metres is not
        # known here; the drop speed in m/s scaled by a typical 600 px/m serves as a proxy
        strength = strength_of(speed_mps * 600, size_m * 600, scale)
        material = impulses[0].material if impulses else None
        found.append(Contact(c.time_s, xy, strength, material, round(c.time_s, 9) in required))
    return clip_features(clip.frames, clip.times_s, (), found)


SOURCES = {"sprites": sprite_features, "bullet": bullet_features}


def _make(job: tuple[str, int, Path]) -> str:
    source, seed, path = job
    if path.exists():
        return "kept"
    features = SOURCES[source](seed)
    tmp = path.with_suffix(".tmp.npz")
    features.save(tmp)
    maps_path(tmp).rename(maps_path(path))
    tmp.rename(path)  # last: a clip whose .npz exists is whole
    return "made"


def build(source: str, out: Path, seeds: range, workers: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(source, s, out / f"{s:06d}.npz") for s in seeds]
    todo = [j for j in jobs if not j[2].exists()]
    log.info("%d clips, %d to make", len(jobs), len(todo))
    if workers <= 1:
        for j in todo:
            _make(j)
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for i, _ in enumerate(pool.imap_unordered(_make, todo, chunksize=4)):
            if i % 100 == 0:
                log.info("%d / %d", i, len(todo))


def load_dir(folder: Path, limit: int | None = None) -> list[ClipFeatures]:
    files = sorted(Path(folder).glob("[0-9]*.npz"))[:limit]
    return [ClipFeatures.load(f) for f in files if ".tmp" not in f.name]


def seed_range(text: str) -> range:
    a, b = text.split(":")
    return range(int(a), int(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=sorted(SOURCES), default="sprites")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seeds", type=seed_range, default=range(0, 2000))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    np.seterr(all="ignore")
    build(args.source, args.out or Path("data/motion") / args.source, args.seeds, args.workers)


if __name__ == "__main__":
    main()
