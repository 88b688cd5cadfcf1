"""Choose the contacts tier's firing threshold on the whole path, on validation clips:

    python -m engines.eval.contact_threshold [--tier objects] [--clips 14] [--write]

The head's threshold is first set on simulated tracks (engines.tracks.train); the localiser's
real tracks are noisier and hold false objects, so the threshold that serves users best is
chosen here, on clips rendered, encoded and decoded like the sync evaluation's but from other
seeds (VALIDATION_SEED: fresh and held-out scenes, and controls, at every frame rate). Each
clip is run once at the lowest threshold; a higher threshold keeps the events fired with at
least that probability (close to, not exactly, what a run at that threshold fires: an event
held back can let a neighbour through). Prints F1 and spurious events per threshold and chooses
the highest threshold whose mean F1 (fresh, held out) is within F1_TOLERANCE of the best (as
good a score with fewer spurious events); `--write` stores it in the tier's config.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from engines.eval.onsets import combined, score_onsets
from engines.eval.scenes import EvalClip, eval_set
from service.config import Settings
from service.media.decode import DecodeLimits, open_video
from service.pipeline.backends.base import create_backend
from service.pipeline.contacts.synth import ContactSynth
from service.pipeline.contacts.tier import ContactTier, load_contact_tier

log = logging.getLogger(__name__)
VALIDATION_SEED = 5_000_000  # apart from every other set (bench.eval: 3_000_000)
F1_TOLERANCE = 0.01
THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8)


def fired(tier: ContactTier, synth: ContactSynth, video: Path) -> tuple[np.ndarray, np.ndarray]:
    """(times s, probabilities) of the events the stream fires on the video."""
    limits = DecodeLimits.from_settings(Settings())
    with open_video(
        video, width=tier.width, height=tier.height, limits=limits, letterbox=True
    ) as stream:
        for batch in stream:
            synth.push(batch.pts_s, batch.rgb)
        duration = stream.end_s - (synth.t0 or 0.0)
    list(synth.finish(duration))
    return (
        np.array([f.event.time_s for f in synth.fired]),
        np.array([f.probability for f in synth.fired]),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="objects")
    parser.add_argument("--clips", type=int, default=14, help="per scene set (fresh, held out)")
    parser.add_argument("--controls", type=int, default=4, help="per scene set")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = Settings()
    tier = load_contact_tier(settings.models_dir, args.tier)
    backend = create_backend("cpu", tier, threads=1)
    low = min(THRESHOLDS)
    runs: list[tuple[EvalClip, np.ndarray, np.ndarray]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for holdout in (False, True):
            for clip in eval_set(
                Path(tmp),
                clips=args.clips,
                controls=args.controls,
                seed=VALIDATION_SEED + 10_000 * holdout,
                control_seed=VALIDATION_SEED + 10_000 * holdout + 5_000,
                holdout=holdout,
                duration_s=5.0,
                size=(320, 180),
            ):
                synth = ContactSynth(_at(tier, low), backend)
                times, probability = fired(tier, synth, clip.video)
                runs.append((clip, times, probability))
                clip.video.unlink()
                log.info("%s %s: %d events", clip.name, clip.rate, len(times))
    table = {}
    for threshold in THRESHOLDS:
        scores = [(c, score_onsets(t[p >= threshold], c.reference)) for c, t, p in runs]
        f1 = {
            h: combined([s for c, s in scores if not c.control and _holdout(c) == h]).f1
            for h in (False, True)
        }
        minutes = sum(c.duration_s for c, _ in scores if c.control) / 60
        spurious = sum(s.false_positives for c, s in scores if c.control) / max(minutes, 1e-9)
        table[threshold] = (f1[False], f1[True], spurious)
        print(
            f"threshold {threshold:.2f}: F1 fresh {f1[False]:.3f}, held out {f1[True]:.3f}, "
            f"spurious {spurious:.1f}/min"
        )
    means = {t: float(np.mean(v[:2])) for t, v in table.items()}
    best = max(t for t in means if means[t] >= max(means.values()) - F1_TOLERANCE)
    print(f"chosen: threshold {best} (mean F1 {means[best]:.3f}; best {max(means.values()):.3f})")
    if args.write:
        path = tier.path / "config.json"
        raw = json.loads(path.read_text())
        raw["stages"]["head"]["config"]["threshold"] = best
        path.write_text(json.dumps(raw, indent=1) + "\n")
        print(f"wrote threshold {best} to {path}")


def _holdout(clip: EvalClip) -> bool:
    return int(clip.name.split()[-1]) >= VALIDATION_SEED + 10_000


def _at(tier: ContactTier, threshold: float) -> ContactTier:
    return replace(tier, head_config=replace(tier.head_config, threshold=threshold))


if __name__ == "__main__":
    main()
