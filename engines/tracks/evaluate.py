"""Scoring a track detector against the required-onset reference of simulated clips.

A detector maps one clip's tracks, times (N,) s and pixels (N, O, 2) model px (NaN = not
detected), to event times (s, sorted): every object's events merged into the clip's. It is
scored as engines.eval.sync scores fired events: `score_onsets` (+-50 ms) against
`required_reference` at the sync evaluation's size, don't-care contacts ignored.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.eval.onsets import OnsetScore, Reference, combined, score_onsets
from engines.eval.scenes import FRAME_RATES
from engines.tracks.data import (
    CACHE_DIR,
    CACHE_VERSION,
    FilmedTracks,
    augment,
    film,
    frame_times,
    load_scenes,
    reference,
    stable_seed,
)
from service.pipeline.contacts.events import merge_tracks, pick

EVAL_SEED = 1_000_000  # fresh and held-out scenes (as engines.eval.sync)
CONTROL_SEED = 1_500_000  # controls (as engines.eval.sync: + CONTROL_SEED_OFFSET)


@dataclass(frozen=True)
class EvalClip:
    """One scene filmed at one frame rate (a FRAME_RATES label) and its reference; no
    simulator tracks kept (the reference is computed once)."""

    seed: int
    holdout: bool
    kind: str
    rate: str
    times_s: np.ndarray
    pixels: np.ndarray  # (N, O, 2) model px, clean
    reference: Reference
    duration_s: float


def eval_clips(
    *,
    holdout: bool,
    count: int,
    variant: str = "scene",
    rates: tuple[str, ...] = tuple(FRAME_RATES),
    first: int | None = None,
    cache_dir: Path = CACHE_DIR,
) -> list[EvalClip]:
    """`count` scenes (seeds from `first`, by default EVAL_SEED, or CONTROL_SEED for
    controls), each filmed at every rate: count * len(rates) clips, cached on disk."""
    if first is None:
        first = EVAL_SEED if variant == "scene" else CONTROL_SEED
    held = "holdout" if holdout else "fresh"
    name = f"v{CACHE_VERSION}_{variant}_{held}_{count}_{'-'.join(rates)}"
    if first not in (EVAL_SEED, CONTROL_SEED):
        name += f"_from{first}"
    path = cache_dir / "eval" / f"{name}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    for larger in range(count + 1, 1001):  # a larger set from the same seeds holds this one
        other = cache_dir / "eval" / f"{name.replace(f'_{count}_', f'_{larger}_', 1)}.pkl"
        if other.exists():
            with other.open("rb") as f:
                return pickle.load(f)[: count * len(rates)]  # seed-major, rates in order
    clips = []
    records = load_scenes(
        range(first, first + count), holdout=holdout, variant=variant, keep_tracks=True
    )
    for record in records:
        for rate in rates:
            filmed = film(record, frame_times(rate, record.duration_s, record.seed), rate)
            clips.append(_eval_clip(filmed, reference(record, filmed)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(clips, f, protocol=pickle.HIGHEST_PROTOCOL)
    return clips


def _eval_clip(filmed: FilmedTracks, ref: Reference) -> EvalClip:
    record = filmed.record
    return EvalClip(
        seed=record.seed,
        holdout=record.holdout,
        kind=record.kind,
        rate=filmed.rate,
        times_s=filmed.times_s,
        pixels=filmed.pixels,
        reference=ref,
        duration_s=record.duration_s,
    )


@dataclass(frozen=True)
class Result:
    clip: EvalClip
    events_s: np.ndarray
    score: OnsetScore


Scorer = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
TrackScores = list[tuple[np.ndarray, np.ndarray]]  # per object: (score, time) per interval


def score_tracks(scorer: Scorer, clips: list[EvalClip], noise_px: float) -> list[TrackScores]:
    """A per-track scorer (times, one track's pixels -> per-interval score and time) on every
    track of every clip, under a noise draw fixed per clip and noise level: for sweeping
    thresholds without rescoring."""
    out = []
    for clip in clips:
        rng = np.random.default_rng(stable_seed(clip.seed, clip.holdout, clip.rate, noise_px))
        pixels = augment(clip.pixels, rng, noise_px)
        out.append([scorer(clip.times_s, pixels[:, o]) for o in range(pixels.shape[1])])
    return out


def run_scored(scored: list[TrackScores], clips: list[EvalClip], threshold: float) -> list[Result]:
    """Scores from `score_tracks` as results: events picked at `threshold`, tracks merged."""
    results = []
    for clip, tracks in zip(clips, scored, strict=True):
        events = merge_tracks([pick(score, when, threshold) for score, when in tracks])
        results.append(Result(clip, events, score_onsets(events, clip.reference)))
    return results


def total(results: list[Result]) -> OnsetScore:
    return combined([r.score for r in results])


def summary_row(score: OnsetScore) -> tuple[float, float, float, float, float, int]:
    """(F1, precision, recall, median |error| ms, % within 10 ms, required onsets)."""
    errors = np.abs(score.errors_s) * 1000
    median = float(np.median(errors)) if len(errors) else float("nan")
    within = float(np.mean(errors <= 10) * 100) if len(errors) else float("nan")
    required = score.true_positives + score.false_negatives
    return score.f1, score.precision, score.recall, median, within, required
