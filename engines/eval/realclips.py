"""The real clips with their own sound (`clips.json`) and how a detector is scored on them.

    clips = load_clips()                                  # FileNotFoundError when not found
    report = score(detector, clips, source="fired")       # detector: video path -> Detection

Reference onsets are seconds from the start of each clip's own audio, which starts with its first
video frame in every clip of the set (stream start times 0); a `Detection` is timed from the
first frame, as the service times its markers and tracks. Per clip, the Foley onsets are matched
to the reference within +-50 ms and +-100 ms, one to one, closest pairs first
(`engines.eval.onsets.match_onsets`). Scored positives: kind positive, no flag (music, speech,
dense, continuous: the reference misses or adds onsets there) and at least MIN_REFERENCE_ONSETS
reference onsets; the others are reported, not averaged. Negatives have no contact sound: every
onset there is spurious, counted per minute over all of them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from engines.eval.onsets import OnsetScore, combined, detect_onsets, match_onsets, matched_pairs
from engines.eval.quality import onset_levels, rank_correlation

log = logging.getLogger(__name__)

Kind = Literal["positive", "negative"]
Source = Literal["fired", "rendered"]
SOURCES: tuple[Source, ...] = get_args(Source)
MIN_REFERENCE_ONSETS = 2
CHANCE_SEEDS = 200
CHANCE_SEED_BASE = 31_000  # seed k of the chance row: CHANCE_SEED_BASE + k, the same for all clips
CEILING_TOLERANCE_S = 0.05
CLICK_S = 0.003  # a clean click: a decaying 2 kHz burst at -6 dBFS
ENV_CLIPS_DIR = "FOLEY_REALCLIPS"
# Beside the repository (the parent of the `engines` package folder), never inside it.
DEFAULT_CLIPS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "realclips"


@dataclass(frozen=True)
class RealClip:
    """One entry of clips.json; `path`: the video."""

    file: str
    kind: Kind
    flags: tuple[str, ...]
    fps: float
    duration_s: float
    audio_onsets_s: tuple[float, ...]  # increasing
    path: Path

    @property
    def name(self) -> str:
        """The clip's id, what `--only` takes: "p01" for p01_drumkit_kick_studio.mp4."""
        return self.file.split("_")[0]

    @property
    def scored(self) -> bool:
        """Averaged into the macro F1 (see the module docstring)."""
        enough = len(self.audio_onsets_s) >= MIN_REFERENCE_ONSETS
        return self.kind == "positive" and not self.flags and enough


def find_clips_dir(given: Path | None = None) -> Path:
    """`given`, else $FOLEY_REALCLIPS, else DEFAULT_CLIPS_DIR: the first one set, which must hold
    clips.json (no fallback to the next: a folder named and missing is a mistake)."""
    env = os.environ.get(ENV_CLIPS_DIR)
    if given is not None:
        folder, how = given, "given"
    elif env:
        folder, how = Path(env), f"from ${ENV_CLIPS_DIR}"
    else:
        folder, how = DEFAULT_CLIPS_DIR, "the default"
    if not (folder / "clips.json").is_file():
        raise FileNotFoundError(
            f"no real clips: looked in {folder} ({how}) and found no clips.json; name the folder "
            f"with --clips-dir or ${ENV_CLIPS_DIR} (default: {DEFAULT_CLIPS_DIR})"
        )
    return folder


def load_clips(folder: Path | None = None, *, only: Sequence[str] | None = None) -> list[RealClip]:
    """The clips of `folder` (see `find_clips_dir`), in the file's order; `only`: those whose
    id ("p01"), stem or file name is listed (ValueError for a name that is none of them)."""
    folder = find_clips_dir(folder)
    entries = json.loads((folder / "clips.json").read_text())
    clips = [
        RealClip(
            file=e["file"],
            kind=e["kind"],
            flags=tuple(e["flags"]),
            fps=float(e["fps"]),
            duration_s=float(e["duration_s"]),
            audio_onsets_s=tuple(sorted(map(float, e["audio_onsets_s"]))),
            path=folder / e["file"],
        )
        for e in entries
    ]
    if only is not None:
        wanted = set(only)
        unknown = wanted - {n for c in clips for n in (c.name, c.path.stem, c.file)}
        if unknown:
            known = ", ".join(c.name for c in clips)
            raise ValueError(f"no clip named {', '.join(sorted(unknown))} (clips: {known})")
        clips = [c for c in clips if wanted & {c.name, c.path.stem, c.file}]
    for clip in clips:
        if clip.kind not in get_args(Kind):
            raise ValueError(f"{clip.file}: kind {clip.kind!r} is neither positive nor negative")
        if not clip.path.is_file():
            raise FileNotFoundError(f"{clip.path}: listed in clips.json, not there")
    return clips


@dataclass(frozen=True)
class Detection:
    """What a detector made of one video: when it fired (s from the first frame, its markers)
    and, where it renders sound, the track (float32 mono, sample 0 at the first frame)."""

    fired_s: np.ndarray
    audio: np.ndarray | None = None
    sample_rate: int | None = None

    def __post_init__(self) -> None:
        if (self.audio is None) != (self.sample_rate is None):
            raise ValueError("a Detection's audio and sample_rate come together")


Detector = Callable[[Path], Detection]


@dataclass(frozen=True)
class ClipScore:
    clip: RealClip
    onsets_s: np.ndarray  # the Foley onsets scored (fired, or heard in the render)
    at_50ms: OnsetScore
    at_100ms: OnsetScore

    @property
    def offset_ms(self) -> float:
        """Median signed offset (Foley - reference) of the +-100 ms matches; nan: none."""
        return _median_ms(self.at_100ms.errors_s)


def score_clip(clip: RealClip, onsets_s: np.ndarray) -> ClipScore:
    onsets = np.sort(np.asarray(onsets_s, float))
    reference = np.asarray(clip.audio_onsets_s, float)
    return ClipScore(
        clip, onsets, match_onsets(onsets, reference, 0.05), match_onsets(onsets, reference, 0.10)
    )


@dataclass(frozen=True)
class Chance:
    """Random onsets, uniform over each scored positive, as many as its reference onsets: F1
    averaged over `seeds` draws per clip, then over the clips."""

    f1_50ms: float
    f1_100ms: float
    seeds: int


def chance(clips: Sequence[RealClip], seeds: int = CHANCE_SEEDS) -> Chance:
    per_clip = [_chance_f1s(clip, seeds) for clip in clips if clip.scored]
    f1_50, f1_100 = np.mean(per_clip, axis=0) if per_clip else (np.nan, np.nan)
    return Chance(float(f1_50), float(f1_100), seeds)


def _chance_f1s(clip: RealClip, seeds: int) -> np.ndarray:
    """(F1 at +-50 ms, at +-100 ms) of random onsets on `clip`, averaged over `seeds` draws."""
    draws = []
    for k in range(seeds):
        rng = np.random.default_rng(CHANCE_SEED_BASE + k)
        scored = score_clip(clip, rng.uniform(0.0, clip.duration_s, len(clip.audio_onsets_s)))
        draws.append((scored.at_50ms.f1, scored.at_100ms.f1))
    return np.mean(draws, axis=0)


@dataclass(frozen=True)
class Report:
    """One detector on one source over a set of clips."""

    label: str  # the detector's name
    source: Source
    clips: tuple[ClipScore, ...]
    chance: Chance
    # rendered: F1 (+-50 ms, over all clips) of clean clicks at every fired time, detected back
    click_ceiling: float | None = None
    # rendered, where the clips' own sound was read: whether the Foley's hits are loud where the
    # clip's own are (`levels`)
    levels: LevelFollowing | None = None

    @property
    def scored(self) -> list[ClipScore]:
        return [c for c in self.clips if c.clip.scored]

    @property
    def negatives(self) -> list[ClipScore]:
        return [c for c in self.clips if c.clip.kind == "negative"]

    @property
    def f1_50ms(self) -> float:
        """Macro F1 at +-50 ms over the scored positives (nan: none)."""
        return _mean([c.at_50ms.f1 for c in self.scored])

    @property
    def f1_100ms(self) -> float:
        return _mean([c.at_100ms.f1 for c in self.scored])

    @property
    def offset_ms(self) -> float:
        """Median signed offset (Foley - reference) of the scored positives' +-100 ms matches."""
        return _median_ms(np.concatenate([c.at_100ms.errors_s for c in self.scored] or [[]]))

    @property
    def negatives_per_min(self) -> float:
        """All onsets on the negatives over all their minutes (nan: no negative)."""
        minutes = sum(c.clip.duration_s for c in self.negatives) / 60
        return sum(len(c.onsets_s) for c in self.negatives) / minutes if minutes else np.nan

    def to_json(self) -> dict[str, Any]:
        def number(x: float | None) -> float | None:
            return None if x is None or np.isnan(x) else round(float(x), 4)

        def at(s: OnsetScore) -> dict[str, Any]:
            return {k: number(getattr(s, k)) for k in ("precision", "recall", "f1")}

        return {
            "detector": self.label,
            "source": self.source,
            "f1_50ms": number(self.f1_50ms),
            "f1_100ms": number(self.f1_100ms),
            "median_offset_ms": number(self.offset_ms),
            "negatives_onsets_per_min": number(self.negatives_per_min),
            "click_ceiling": number(self.click_ceiling),
            "chance": {
                "f1_50ms": number(self.chance.f1_50ms),
                "f1_100ms": number(self.chance.f1_100ms),
                "seeds": self.chance.seeds,
            },
            "clips": [
                {
                    "file": c.clip.file,
                    "kind": c.clip.kind,
                    "flags": list(c.clip.flags),
                    "scored": c.clip.scored,
                    "n_reference": len(c.clip.audio_onsets_s),
                    "n_foley": len(c.onsets_s),
                    "at_50ms": at(c.at_50ms),
                    "at_100ms": at(c.at_100ms),
                    "median_offset_ms": number(c.offset_ms),
                }
                for c in self.clips
            ],
        }


def detect(detector: Detector, clips: Sequence[RealClip], *, label: str = "") -> list[Detection]:
    """`detector` on each clip's video, in order (logged: what it made of each)."""
    detections = []
    for clip in clips:
        started = time.perf_counter()
        detection = detector(clip.path)
        log.info(
            "%s %s: %d fired (%.2f s)",
            label,
            clip.name,
            len(detection.fired_s),
            time.perf_counter() - started,
        )
        detections.append(detection)
    return detections


def score(
    detector: Detector,
    clips: Sequence[RealClip],
    source: Source = "fired",
    *,
    label: str = "",
) -> Report:
    """`detector` on every clip, scored on `source` (see `score_detections`)."""
    return score_detections(clips, detect(detector, clips, label=label), source, label=label)


def score_detections(
    clips: Sequence[RealClip],
    detections: Sequence[Detection],
    source: Source,
    *,
    label: str = "",
) -> Report:
    """The detections of `clips` (one each, in order) scored on their fired times or, for
    "rendered", on the onsets heard in their tracks (ValueError where a track is missing)."""
    if len(detections) != len(clips):
        raise ValueError(f"{len(detections)} detections for {len(clips)} clips")
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is not one of {', '.join(SOURCES)}")
    onsets = [_onsets(clip, d, source) for clip, d in zip(clips, detections, strict=True)]
    return Report(
        label=label,
        source=source,
        clips=tuple(score_clip(c, o) for c, o in zip(clips, onsets, strict=True)),
        chance=chance(clips),
        click_ceiling=click_ceiling(clips, detections) if source == "rendered" else None,
    )


@dataclass(frozen=True)
class LevelFollowing:
    """Spearman's rho between the level of each matched (+-100 ms) Foley onset and that of the
    clip's own onset it matched, over the scored positives, each side's levels taken relative to
    its clip's median (a recording's gain and the render's loudness normalisation are not the
    hits' loudness); nan with fewer than three pairs."""

    rho: float
    pairs: int


def levels(clips: Sequence[RealClip], detections: Sequence[Detection]) -> LevelFollowing:
    foley: list[np.ndarray] = []
    own: list[np.ndarray] = []
    for clip, detection in zip(clips, detections, strict=True):
        rate = detection.sample_rate
        if not clip.scored or detection.audio is None or rate is None:
            continue
        sound = clip_audio(clip, rate)
        heard = detect_onsets(detection.audio, rate)
        reference = np.asarray(clip.audio_onsets_s, float)
        pairs = matched_pairs(heard, reference, 0.10)
        if sound is None or not pairs:
            continue
        a = onset_levels(detection.audio, rate, heard[[i for i, _ in pairs]])
        b = onset_levels(sound, rate, reference[[j for _, j in pairs]])
        foley.append(a - np.median(a))
        own.append(b - np.median(b))
    if not foley:
        return LevelFollowing(float("nan"), 0)
    a, b = np.concatenate(foley), np.concatenate(own)
    return LevelFollowing(rank_correlation(a, b), len(a))


def clip_audio(clip: RealClip, sample_rate: int) -> np.ndarray | None:
    """The clip's own sound, mono float32 at `sample_rate` from its first sample (the time base
    of its reference onsets); None: the file has no audio."""
    import av

    with av.open(str(clip.path)) as container:
        if not container.streams.audio:
            return None
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        pieces = []
        for frame in container.decode(container.streams.audio[0]):
            pieces += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
        pieces += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    return np.concatenate(pieces).astype(np.float32) if pieces else None


def _onsets(clip: RealClip, detection: Detection, source: Source) -> np.ndarray:
    if source == "fired":
        return np.asarray(detection.fired_s, float)
    if detection.audio is None or detection.sample_rate is None:
        raise ValueError(f"{clip.file}: the detector rendered no audio to score")
    return detect_onsets(detection.audio, detection.sample_rate)


def click_ceiling(clips: Sequence[RealClip], detections: Sequence[Detection]) -> float:
    """F1 (+-CEILING_TOLERANCE_S, pooled over the clips) of `detect_onsets` on clean clicks at
    every fired time against those times: the most the rendered source can keep of the fired."""
    scores = []
    for clip, detection in zip(clips, detections, strict=True):
        rate = detection.sample_rate or 48000
        fired = np.sort(np.asarray(detection.fired_s, float))
        end_s = max(clip.duration_s, fired[-1] + 0.1 if len(fired) else 0.0)
        track = click_track(fired, round(end_s * rate), rate)
        scores.append(match_onsets(detect_onsets(track, rate), fired, CEILING_TOLERANCE_S))
    return combined(scores).f1 if scores else np.nan


def click_track(times_s: np.ndarray, num_samples: int, sample_rate: int) -> np.ndarray:
    """A clean click (CLICK_S) starting on the sample of each time, in silence."""
    n = np.arange(round(CLICK_S * sample_rate))
    click = 0.5 * np.sin(2 * np.pi * 2000 * n / sample_rate) * np.exp(-n / (len(n) / 4))
    track = np.zeros(num_samples, np.float32)
    for t in times_s:
        start = max(0, round(t * sample_rate))
        piece = click[: max(0, num_samples - start)]
        track[start : start + len(piece)] += piece
    return track


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else np.nan


def _median_ms(errors_s: np.ndarray) -> float:
    return float(np.median(errors_s) * 1000) if len(errors_s) else np.nan
