"""Fired events of the object-level encoder on the sync set: localiser -> tracks -> contact head.

    python -m engines.eval.objects [--scenes holdout|fresh] [--clips 28] [--controls 8]

Weights: engines/artifacts/objects/ (--localiser, --head), not yet a tier.

The clips, reference and scoring are engines.eval.sync's (the same seeds, frame rates and
controls); each clip is decoded by the service's decoder at its own frame times, letterboxed to
the localiser's 192x108, and every frame's peaks are joined into tracks (reset at shot cuts),
whose contact head fires the events. Only the fired events are scored (there is no sound yet).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import numpy as np
import torch

from engines.eval.onsets import OnsetScore, combined, score_onsets
from engines.eval.scenes import FRAME_RATES, EvalClip, eval_set
from engines.eval.sync import CONTROL_SEED_OFFSET, HOLDOUT_SEED_BASE
from engines.models.localiser import Localiser, peaks
from engines.sim.materials import OBJECT_MATERIALS
from engines.tracks.head import HeadDetector, load_head
from engines.train.localiser import HEIGHT, WIDTH
from service.config import Settings
from service.media.decode import DecodeLimits, open_video
from service.pipeline.contacts.cuts import CutDetector
from service.pipeline.contacts.events import merge_tracks, pick
from service.pipeline.contacts.tracking import Detections, Tracker

log = logging.getLogger(__name__)
MIN_TRACK_FRAMES = 4
OBJECTS = Path(__file__).resolve().parents[1] / "artifacts" / "objects"


def decode(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """pts (N,) s from the first frame and letterboxed frames (N, HEIGHT, WIDTH, 3)."""
    limits = DecodeLimits.from_settings(Settings())
    pts, rgb = [], []
    with open_video(path, width=WIDTH, height=HEIGHT, limits=limits, letterbox=True) as stream:
        for batch in stream:
            pts.append(batch.pts_s.copy())
            rgb.append(batch.rgb.copy())
    times = np.concatenate(pts)
    return times - times[0], np.concatenate(rgb)


def tracks_of(localiser: Localiser, times: np.ndarray, rgb: np.ndarray):
    """Every track of the clip (a cut ends them all and starts afresh)."""
    x = torch.from_numpy(rgb).permute(0, 3, 1, 2).float() / 255.0
    cuts = CutDetector()
    cut = np.array([cuts.push(f) for f in rgb])
    previous = torch.cat([x[:1], x[:-1]])
    previous[cut] = x[cut]  # no motion across a cut
    with torch.no_grad():
        found = peaks(localiser(x, previous))
    tracker = Tracker()
    for k, t in enumerate(times):
        if cut[k]:
            tracker.reset()
        tracker.update(
            float(t),
            Detections(
                found.score[k].numpy(),
                found.xy[k].numpy(),
                found.radius[k].numpy(),
                found.materials[k].numpy(),
            ),
        )
    tracker.reset()
    return tracker.ended


def fired(localiser: Localiser, detector: HeadDetector, video: Path) -> np.ndarray:
    times, rgb = decode(video)
    events = []
    for track in tracks_of(localiser, times, rgb):
        if track.seen < MIN_TRACK_FRAMES:
            continue
        prob, when = detector.scores(np.asarray(track.times_s), np.stack(track.xy))
        events.append(pick(prob, when, detector.config.threshold))
    return merge_tracks(events)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--localiser", type=Path, default=OBJECTS / "localiser.pt")
    parser.add_argument("--head", type=Path, default=OBJECTS / "contact_head.pt")
    parser.add_argument("--scenes", choices=("holdout", "fresh"), default="holdout")
    parser.add_argument("--clips", type=int, default=28)
    parser.add_argument("--controls", type=int, default=8)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    localiser = Localiser(materials=len(OBJECT_MATERIALS))
    localiser.load_state_dict(torch.load(args.localiser)["model"])
    localiser.eval()
    detector = HeadDetector(load_head(args.head).eval())
    results: list[tuple[EvalClip, OnsetScore]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for clip in eval_set(
            Path(tmp),
            clips=args.clips,
            controls=args.controls,
            seed=HOLDOUT_SEED_BASE,
            control_seed=HOLDOUT_SEED_BASE + CONTROL_SEED_OFFSET,
            holdout=args.scenes == "holdout",
            duration_s=args.duration,
            size=(320, 180),
        ):
            score = score_onsets(fired(localiser, detector, clip.video), clip.reference)
            log.info("%s %s: F1 %.2f", clip.name, clip.rate, score.f1)
            results.append((clip, score))
    print(report(results))


def report(results: list[tuple[EvalClip, OnsetScore]]) -> str:
    scenes = [s for c, s in results if not c.control]
    total = combined(scenes)
    errors = np.abs(total.errors_s) * 1000
    lines = [
        f"fired events: F1 {total.f1:.3f} (P {total.precision:.3f}, R {total.recall:.3f}), "
        f"{total.true_positives + total.false_negatives} required; median {np.median(errors):.1f}"
        f" ms, within 10 ms {np.mean(errors <= 10):.0%}"
    ]
    for rate in FRAME_RATES:
        sub = [s for c, s in results if c.rate == rate and not c.control]
        if sub:
            lines.append(f"  {rate:>6}: F1 {combined(sub).f1:.3f}")
    controls = [(c, s) for c, s in results if c.control]
    if controls:
        minutes = sum(c.duration_s for c, _ in controls) / 60
        false = sum(s.false_positives for _, s in controls)
        lines.append(f"controls: {false} false events in {minutes:.2f} min")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
