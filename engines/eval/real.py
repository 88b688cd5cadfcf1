"""Contact timing on real footage: a detector's onsets against each clip's own recorded sound.

    python -m engines.eval.real [--tier preview] [--tier objects ...] [--source fired|rendered|both]
                                [--only p01,p03] [--json OUT] [--clips-dir DIR]

The clips are not part of the project (their terms allow measuring, nothing else): they are read
from `--clips-dir`, else $FOLEY_REALCLIPS, else `../shared/realclips` beside the repository (its
README describes them), and nothing from them is written anywhere but `--json`. `clips.json`
gives each clip's kind (positive: visible contacts make its sound; negative: motion with no
contact sound), flags, and reference onsets picked from its own audio (engines.eval.realclips).

Any `Detector` can be measured; `tier_detector` renders with a tier of the service. Sources:
- fired: the times the detector fired (a tier's contact markers);
- rendered: the onsets `detect_onsets` hears in the track it rendered, read against its ceiling:
  the F1 of clean clicks at every fired time, detected back (events closer together than the
  onset detector separates count as one).
Scores (engines.eval.realclips): F1 at +-50 and +-100 ms, macro over the scored positives, the
median offset of their +-100 ms matches, the chance row, onsets per minute on negatives, and for
the rendered source whether the Foley's hits are loud where the clip's own are (LevelFollowing).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import wave
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np

from engines.eval.realclips import (
    CHANCE_SEEDS,
    SOURCES,
    ClipScore,
    Detection,
    Detector,
    RealClip,
    Report,
    Source,
    detect,
    levels,
    load_clips,
    score_detections,
)


def tier_detector(tier: str, models_dir: Path | None = None) -> Detector:
    """A detector that renders each video as `foley generate --tier TIER` does (WAV, 48 kHz, the
    default loudness: what users hear) and fires at its contact markers. The tier is loaded here,
    once; each clip renders with an empty cache, as a process's first render does, so that no
    clip's result depends on the clips rendered before it. `models_dir`: None, the configured
    one (FOLEY_MODELS_DIR or the shipped tiers). Raises InvalidInput for an unknown tier."""
    # Here, not at the top: the decoder's children import this module when it is the program's
    # main module, and ONNX Runtime there would slow every decode.
    from service.config import Settings
    from service.pipeline.engine import FoleyEngine
    from service.pipeline.tiers import check_tier
    from service.pipeline.types import RenderOptions

    given = {} if models_dir is None else {"models_dir": models_dir}
    settings = Settings(**given)
    check_tier(settings, tier)
    loaded = FoleyEngine.load(settings, tier)

    def render(video: Path) -> Detection:
        engine = FoleyEngine(loaded.settings, loaded.tier, loaded.backend)
        with tempfile.TemporaryDirectory() as tmp:
            track = Path(tmp) / "foley.wav"
            result = engine.render(video, track, RenderOptions(format="wav", tier=tier))
            audio, rate = read_wav(track)
        # Markers and the track both start at the first frame (RenderResult.start_s).
        return Detection(np.asarray(result.events_s, float), audio, rate)

    return render


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A mono 16-bit PCM WAV (what the engine writes) -> float32 samples in [-1, 1), rate."""
    with wave.open(str(path), "rb") as f:
        if f.getnchannels() != 1 or f.getsampwidth() != 2:
            raise ValueError(f"{path}: not mono 16-bit PCM")
        rate, data = f.getframerate(), f.readframes(f.getnframes())
    return np.frombuffer(data, "<i2").astype(np.float32) / 32768.0, rate


# Tables -------------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """An aligned text table: the first `left` columns left-aligned, the others right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *map(line, rows)])


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None or np.isnan(value) else format(value, spec)


def clip_table(report: Report) -> str:
    """One row per clip; a positive's F1 is in brackets when it is not averaged."""

    def f1(c: ClipScore, value: float) -> str:
        if c.clip.kind == "negative":
            return "-"
        return _num(value) if c.clip.scored else f"({_num(value)})"

    header = ["clip", "kind", "flags", "n ref", "n foley", "F1@50", "F1@100", "offset ms"]
    rows = [
        [
            c.clip.name,
            c.clip.kind,
            ",".join(c.clip.flags) or "-",
            str(len(c.clip.audio_onsets_s)),
            str(len(c.onsets_s)),
            f1(c, c.at_50ms.f1),
            f1(c, c.at_100ms.f1),
            _num(c.offset_ms, "+.1f") if c.clip.kind == "positive" else "-",
        ]
        for c in report.clips
    ]
    return table(header, rows, left=3)


def summary_table(reports: Sequence[Report]) -> str:
    """One row per report, then the chance row (the same for every report of one clip set)."""
    header = [
        "detector",
        "source",
        "F1@50",
        "F1@100",
        "onsets/min on negatives",
        "median offset ms",
        "click ceiling",
        "level rho (pairs)",
    ]
    rows = [
        [
            r.label,
            r.source,
            _num(r.f1_50ms),
            _num(r.f1_100ms),
            _num(r.negatives_per_min, ".1f"),
            _num(r.offset_ms, "+.1f"),
            _num(r.click_ceiling),
            "-" if r.levels is None else f"{_num(r.levels.rho)} ({r.levels.pairs})",
        ]
        for r in reports
    ]
    chance = reports[0].chance
    random = f"random x{chance.seeds}"
    rows.append(["chance", random, _num(chance.f1_50ms), _num(chance.f1_100ms), *["-"] * 4])
    return table(header, rows, left=2)


def describe_set(report: Report) -> str:
    scored = report.scored
    negatives = report.negatives
    minutes = sum(c.clip.duration_s for c in negatives) / 60
    return (
        f"{len(scored)} scored positives ({sum(len(c.clip.audio_onsets_s) for c in scored)} "
        f"reference onsets), {len(report.clips) - len(scored) - len(negatives)} positives "
        f"reported only (flagged or < 2 onsets), {len(negatives)} negatives ({minutes:.2f} min)"
    )


# Command line -------------------------------------------------------------------------------


def measure(
    detectors: dict[str, Detector], sources: Sequence[Source], clips: list[RealClip]
) -> list[Report]:
    """Each named detector over `clips`, run once and scored on each source."""
    reports = []
    for label, detector in detectors.items():
        detections = detect(detector, clips, label=label)
        for source in sources:
            report = score_detections(clips, detections, source, label=label)
            if source == "rendered":
                report = replace(report, levels=levels(clips, detections))
            reports.append(report)
    return reports


def main(argv: list[str] | None = None) -> int:
    from service.config import Settings
    from service.errors import FoleyError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tier", action="append", help="a tier to measure, repeatable (default: the configured)"
    )
    parser.add_argument("--source", choices=(*SOURCES, "both"), default="both")
    parser.add_argument("--only", help="clips by id or name, comma-separated: p01,p03")
    parser.add_argument("--json", type=Path, help="write the reports here as JSON")
    parser.add_argument(
        "--clips-dir", type=Path, help="default: $FOLEY_REALCLIPS, else ../shared/realclips"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    only = args.only.split(",") if args.only else None
    tiers = args.tier or [Settings().default_tier]
    sources = SOURCES if args.source == "both" else (cast(Source, args.source),)
    started = time.perf_counter()
    try:
        clips = load_clips(args.clips_dir, only=only)
        # Every tier loaded before any renders: a wrong name costs no minutes.
        detectors = {tier: tier_detector(tier) for tier in tiers}
    except (FileNotFoundError, ValueError, FoleyError) as exc:
        print(f"engines.eval.real: error: {exc}", file=sys.stderr)
        return 2
    reports = measure(detectors, sources, clips)
    seconds = time.perf_counter() - started
    print(f"{clips[0].path.parent}: {describe_set(reports[0])}")
    for report in reports:
        print(f"\n{report.label}, {report.source}:\n{clip_table(report)}")
    print(f"\nmacro over the scored positives; chance: {CHANCE_SEEDS} seeds of random onsets")
    print(summary_table(reports))
    print(f"\n{len(tiers)} tier(s) x {len(clips)} clips in {seconds:.1f} s")
    if args.json is not None:
        folder = str(clips[0].path.parent)
        document = {
            "clips_dir": folder,
            "seconds": seconds,
            "reports": [r.to_json() for r in reports],
        }
        args.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
