"""What the sync metric allows a model that only fires events: oracles that know every contact.

    python -m engines.eval.ceiling --clips 48 --scenes fresh

The scenes, frame rates and reference onsets are those of `engines.eval.sync` with the same
arguments. Instead of a model, each oracle fires exactly at the simulator's contacts (the starts
of slides and rolls, and impacts), merged within MIN_GAP_S as the reference merges them:
- "every contact": all impacts, seen or not;
- "seen, >= K px": the impacts whose object is in the picture and changes its on-screen velocity
  by at least K model pixels per model frame (96 pixels across, 30 frames per second), measured
  from the frames of the clip's own rate on either side of the contact.
The reference holds only the contacts a listener hears: an impact masked by the ringing of the one
before, or too soft, is not in it. An oracle fires on those too, so its precision shows how much
of the metric rests on knowing which contacts are heard rather than where they are.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

import numpy as np

from engines.audio.render import synthesize
from engines.eval.onsets import MIN_GAP_S, OnsetScore, combined, match_onsets
from engines.eval.reference import contact_starts, reference_onsets, track_starts
from engines.eval.sync import FPS_CHOICES, HOLDOUT_SEED_BASE
from engines.sim import scene_from_seed
from engines.sim.simulate import screen_track, simulate_unfilmed
from engines.sim.types import SimClip

log = logging.getLogger(__name__)
MODEL_PIXELS = 96  # across the picture, as the encoder sees it
MODEL_FPS = 30
ASPECT = 16 / 9  # the sync evaluation's 320x180 videos
THRESHOLDS_PX = (0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class OracleClip:
    clip: SimClip  # contacts and tracks; screen_xy at the frames of `fps`
    fps: int
    reference: np.ndarray  # the sync evaluation's reference onsets


def velocity_change_px(screen_xy: np.ndarray, fps: float, time_s: float, obj: int) -> float:
    """How much object `obj`'s on-screen velocity changes across a contact at `time_s`, in model
    pixels per model frame: the velocity over the frame interval before the one the contact falls
    in against the velocity over the interval after it. 0 when the object is out of the picture
    on either side. `screen_xy` (N, O, 2): normalised device coordinates at frames k / fps."""
    a = int(np.floor(time_s * fps))  # the last frame before the contact
    b = a + 1
    if a < 1 or b + 1 >= len(screen_xy):
        return 0.0
    p = screen_xy[[a - 1, a, b, b + 1], obj].astype(np.float64)
    if not np.isfinite(p).all() or (np.abs(p[1:3]) > 1.0).any():
        return 0.0
    pixels = p * MODEL_PIXELS / 2 * fps / MODEL_FPS
    before, after = pixels[1] - pixels[0], pixels[3] - pixels[2]
    return float(np.linalg.norm(after - before))


def merged(times: np.ndarray) -> np.ndarray:
    """Sorted times, each closer than MIN_GAP_S to the one kept before it dropped."""
    kept: list[float] = []
    for t in np.sort(times):
        if not kept or t - kept[-1] >= MIN_GAP_S:
            kept.append(float(t))
    return np.asarray(kept)


def oracle_events(c: OracleClip, min_change_px: float | None) -> np.ndarray:
    """The oracle's events: every contact start (None), or slide and roll starts plus the
    impacts seen to change velocity by at least `min_change_px`."""
    if min_change_px is None:
        return merged(contact_starts(c.clip))
    seen = [
        impact.time_s
        for impact in c.clip.impacts
        if velocity_change_px(c.clip.screen_xy, c.fps, impact.time_s, impact.object_id)
        >= min_change_px
    ]
    return merged(np.concatenate([np.asarray(seen, np.float64), track_starts(c.clip)]))


def oracle_clip(seed: int, fps: int, *, duration_s: float, holdout: bool) -> OracleClip:
    spec = scene_from_seed(seed, holdout=holdout)
    clip = simulate_unfilmed(spec, duration_s=duration_s)
    times = np.arange(int(np.ceil(duration_s * fps - 1e-9))) / fps
    clip.screen_xy = screen_track(spec, duration_s=duration_s, times_s=times, aspect=ASPECT)
    truth = synthesize(clip, seed=seed)
    return OracleClip(clip, fps, reference_onsets(clip, truth, 48000))


def scores(clips: list[OracleClip]) -> dict[str, OnsetScore]:
    out = {
        "every contact": combined(
            [match_onsets(oracle_events(c, None), c.reference) for c in clips]
        )
    }
    for px in THRESHOLDS_PX:
        out[f"seen, >= {px:g} px"] = combined(
            [match_onsets(oracle_events(c, px), c.reference) for c in clips]
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--seed", type=int, default=HOLDOUT_SEED_BASE)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--scenes", choices=("holdout", "fresh"), default="holdout")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    clips = [
        oracle_clip(
            args.seed + i,
            FPS_CHOICES[i % len(FPS_CHOICES)],
            duration_s=args.duration,
            holdout=args.scenes == "holdout",
        )
        for i in range(args.clips)
    ]
    print(f"clips: {len(clips)}   reference onsets: {sum(len(c.reference) for c in clips)}")
    print("| oracle | F1 | precision | recall | events |")
    print("|---|---|---|---|---|")
    for name, s in scores(clips).items():
        print(
            f"| {name} | {s.f1:.3f} | {s.precision:.3f} | {s.recall:.3f} | "
            f"{s.true_positives + s.false_positives} |"
        )


if __name__ == "__main__":
    main()
