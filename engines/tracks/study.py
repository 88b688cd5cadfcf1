"""How well do contacts show in trajectories alone? Geometry vs the learned head, measured.

    python -m engines.tracks.study [--clips 150] [--controls 20] [--set both|fresh|holdout]
                                   [--head runs/tracks/head.pt] [--head2 runs/tracks/head_la2.pt]

For each detector, on fresh scenes (the training distribution, unseen seeds from 1e6) and on
held-out scenes (steeper cameras, capsules, larger objects), each scene filmed at every rate of
FRAME_RATES, and at detector noise 0 / 0.1 / 0.25 / 0.5 px (std per coordinate in the 192 px
model frame): onset F1 at +-50 ms against the required reference (every object's events merged),
precision, recall, median |timing error| and the share of matches within 10 ms, per frame rate
and overall; and spurious (false) events per minute on control clips: static scenes under a
still camera, the same under a moving camera, objects in free flight. The targets: F1 >= 0.9,
median <= 5 ms, >= 90 % within 10 ms, at every rate.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

from engines.eval.onsets import matched_pairs
from engines.eval.reference import motion_change_px
from engines.eval.scenes import FRAME_RATES
from engines.sim.types import SimClip
from engines.tracks.data import MODEL_SIZE, load_scenes
from engines.tracks.evaluate import (
    EvalClip,
    Result,
    eval_clips,
    run,
    spurious_per_minute,
    summary_row,
    total,
)
from engines.tracks.geometry import ArcDetector
from engines.tracks.head import HeadDetector, load_head
from service.pipeline.contacts.events import merge_tracks

NOISE_PX: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)
CONTROLS: tuple[str, ...] = ("static", "camera", "freefall")
DEFAULT_HEAD = Path("runs/tracks/head.pt")


@dataclass(frozen=True)
class Named:
    name: str
    detect: Callable[[np.ndarray, np.ndarray], np.ndarray]


def geometry_detector(detector: ArcDetector) -> Named:
    def detect(times_s: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        return merge_tracks(
            [detector.events(times_s, pixels[:, o]) for o in range(pixels.shape[1])]
        )

    return Named(f"geometry L{detector.lookahead}", detect)


def head_detector(path: Path) -> Named:
    detector = HeadDetector(load_head(path))

    def detect(times_s: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        return merge_tracks(
            [detector.events(times_s, pixels[:, o]) for o in range(pixels.shape[1])]
        )

    return Named(f"head L{detector.config.lookahead}", detect)


def _fmt(label: str, results: list[Result]) -> str:
    f1, p, r, med, within, required = summary_row(total(results))
    return f"{label:<34} {f1:5.3f} {p:5.3f} {r:5.3f} {med:6.1f} {within:6.1f}% {required:6d}"


def study(
    detectors: list[Named],
    clips: int,
    controls: int,
    noise: tuple[float, ...] = NOISE_PX,
    held_sets: tuple[str, ...] = ("fresh", "holdout"),
) -> str:
    """The study's table (see the module docstring)."""
    sets = {held: eval_clips(holdout=held == "holdout", count=clips) for held in held_sets}
    control_sets = {
        (held, kind): eval_clips(holdout=held == "holdout", count=controls, variant=kind)
        for held in held_sets
        for kind in CONTROLS
    }
    header = f"{'':<34} {'F1':>5} {'P':>5} {'R':>5} {'med ms':>6} {'<=10ms':>7} {'req':>6}"
    lines = [header]
    overall = [header]
    spurious = [f"{'spurious events per minute':<34} " + " ".join(f"{k:>8}" for k in CONTROLS)]
    for det in detectors:
        for held, scene_clips in sets.items():
            for sigma in noise:
                results = run(det.detect, scene_clips, sigma)
                tag = f"{det.name} {held} noise {sigma:.2f}"
                for rate in FRAME_RATES:
                    sub = [r for r in results if r.clip.rate == rate]
                    lines.append(_fmt(f"{tag} {rate:>5}", sub))
                lines.append(_fmt(f"{tag}   all", results))
                overall.append(_fmt(f"{tag}", results))
                per_kind = [
                    spurious_per_minute(run(det.detect, control_sets[(held, kind)], sigma))
                    for kind in CONTROLS
                ]
                spurious.append(f"{tag:<34} " + " ".join(f"{v:8.2f}" for v in per_kind))
    n_scenes = f"{clips} scenes x {len(FRAME_RATES)} rates per set"
    n_controls = f"{controls} scenes per control kind per set"
    return "\n".join(
        [f"per frame rate ({n_scenes}):", *lines, "", "all rates:", *overall, "",
         f"controls ({n_controls}):", *spurious]
    )  # fmt: skip


CHANGE_BINS_PX = (0.0, 1.0, 2.0, 4.0, np.inf)
GAP_BINS_S = (0.0, 0.03, 0.06, 0.1, 0.2, np.inf)


def anatomy(det: Named, clips: list[EvalClip], noise_px: float) -> str:
    """Recall and timing of the required onsets by how much they change the motion on screen
    (model px per frame, the largest over the contact's objects) and by how long after the
    previous contact of the same object they come: where the misses are."""
    seeds = sorted({c.seed for c in clips})
    records = {r.seed: r for r in load_scenes(seeds, holdout=clips[0].holdout)}
    rows = []  # (change px, gap s, hit, |error| ms)
    for result in run(det.detect, clips, noise_px):
        clip, record = result.clip, records[result.clip.seed]
        matched = dict((j, i) for i, j in matched_pairs(result.events_s, clip.reference.required))
        half = np.array([MODEL_SIZE[0] / 2, -MODEL_SIZE[1] / 2])
        screen = clip.pixels / half + np.array([-1.0, 1.0])  # back to NDC (NaN stays NaN)
        sim = sim_view(clip.times_s, screen.astype(np.float32))
        for j, t in enumerate(clip.reference.required):
            contact = next(c for c in record.found if abs(c.time_s - t) < 1e-9)
            earlier = [
                c.time_s
                for c in record.found
                if c.time_s < t - 1e-9 and set(c.objects) & set(contact.objects)
            ]
            gap = t - max(earlier) if earlier else np.inf
            error = abs(result.events_s[matched[j]] - t) * 1000 if j in matched else np.nan
            rows.append((motion_change_px(sim, contact), gap, j in matched, error))
    data = np.array(rows, float)
    lines = [f"{det.name}, noise {noise_px:.2f} px: recall / median ms / <=10 ms (onsets)"]
    for name, col, bins, unit in (
        ("motion change", 0, CHANGE_BINS_PX, "px/frame"),
        ("after previous contact", 1, GAP_BINS_S, "s"),
    ):
        for lo, hi in itertools.pairwise(bins):
            sel = (data[:, col] >= lo) & (data[:, col] < hi)
            hit = sel & (data[:, 2] > 0)
            if not sel.any():
                continue
            errors = data[hit, 3]
            med = f"{np.median(errors):5.1f}" if len(errors) else "    -"
            within = f"{np.mean(errors <= 10) * 100:4.0f}%" if len(errors) else "    -"
            lines.append(
                f"  {name} {lo:g}-{hi:g} {unit}: {data[sel, 2].mean():.2f} / {med} / {within}"
                f"  ({int(sel.sum())})"
            )
    return "\n".join(lines)


def sim_view(times_s: np.ndarray, screen: np.ndarray) -> SimClip:
    """A frame-less SimClip at the model size, for motion_change_px."""
    frames = np.broadcast_to(
        np.zeros((1, 1, 1, 3), np.uint8), (len(times_s), MODEL_SIZE[1], MODEL_SIZE[0], 3)
    )
    return SimClip(
        spec=None,  # type: ignore[arg-type]  # unread by motion_change_px
        frames=frames,
        times_s=times_s,
        fps=Fraction(1),
        duration_s=float(times_s[-1]),
        physics_hz=0,
        impacts=[],
        tracks=[],
        screen_xy=screen,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=150, help="scenes per set (x every rate)")
    parser.add_argument("--controls", type=int, default=20, help="scenes per control kind")
    parser.add_argument("--set", choices=("both", "fresh", "holdout"), default="both")
    parser.add_argument("--head", type=Path, default=DEFAULT_HEAD, help="lookahead-1 head")
    parser.add_argument("--head2", type=Path, default=None, help="a lookahead-2 head")
    parser.add_argument("--no-geometry", action="store_true")
    parser.add_argument(
        "--anatomy", action="store_true", help="recall by motion change and contact spacing"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    detectors = []
    if not args.no_geometry:
        detectors += [
            geometry_detector(ArcDetector(lookahead=1)),
            geometry_detector(ArcDetector(lookahead=2)),
        ]
    if args.head.exists():
        detectors.append(head_detector(args.head))
    else:
        print(f"no head at {args.head}: train one with python -m engines.tracks.train")
    if args.head2 is not None:
        detectors.append(head_detector(args.head2))
    held_sets = ("fresh", "holdout") if args.set == "both" else (args.set,)
    print(study(detectors, args.clips, args.controls, held_sets=held_sets))
    if args.anatomy and len(detectors) > 0:
        for held in held_sets:
            clips = eval_clips(holdout=held == "holdout", count=args.clips)
            for sigma in (0.0, 0.25):
                print(f"\nwhere the misses are ({held}):")
                print(anatomy(detectors[-1], clips, sigma))
    print(f"\n({(time.perf_counter() - started) / 60:.1f} min)")


if __name__ == "__main__":
    main()
