"""Speed against quality for model tiers (the Pareto table of the compression work).

    python -m bench.tiers service/models/preview service/models/preview-int8 [--clips 24]
        [--real]

For each tier folder, of any kind: live compute per 30 fps frame (one frame per call through
the preview's runner, as a session runs it; p50 and p99 over a 10 s clip), the offline real-time
factor of bench.offline's 10 s 720p clip (end to end to WAV, median of 3), and on bench.eval's
held-out set: onset F1, median timing error and log-mel distance to the ground truth. `--real`:
also the real clips' rendered F1 within +-50 / +-100 ms and onsets per minute on their negatives
(engines.eval.real; the clips are read from $FOLEY_REALCLIPS or ../shared/realclips). All tiers
run in one process, in turn. The quality needs the simulator and torch; they are imported only
once the speed is measured.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.machine import describe
from bench.offline import CLIP_SECONDS, bench_clip
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.runner import create_runner, gather
from service.pipeline.types import RenderOptions


def live_frame_ms(engine: FoleyEngine) -> tuple[float, float]:
    from engines.data.dataset import make_clip

    tier = engine.tier
    record = make_clip(
        20_002, duration_s=10.0, fps=30, model_width=tier.width, model_height=tier.height
    )
    runner = create_runner(tier, engine.backend)
    stream = runner.open()
    times = []
    for k in range(len(record.times_s)):
        frame = (record.times_s[k : k + 1], record.frames[k : k + 1])
        start = time.perf_counter()
        gather(runner.push([stream], [frame]), 1)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times[10:], 50)), float(np.percentile(times[10:], 99))


def offline_rtf(engine: FoleyEngine) -> float:
    clip = bench_clip()
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            raw = RenderOptions(format="wav", loudness=None)  # the model's own cost
            engine.render(clip, Path(tmp) / "out.wav", raw)
            runs.append(time.perf_counter() - start)
    return statistics.median(runs) / CLIP_SECONDS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tiers", type=Path, nargs="+", help="tier folders")
    parser.add_argument("--clips", type=int, default=24, help="held-out clips for the quality")
    parser.add_argument("--real", action="store_true", help="also score the real clips")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # Here, not at the top: the decoder's children import this program's main module
    # (multiprocessing's rule), and torch there would add a second to every render timed.
    from bench.eval import run as evaluate
    from engines.eval.onsets import combined
    from engines.eval.real import load_clips, measure, tier_detector

    real = load_clips(None) if args.real else None

    print(describe())
    print(f"quality on {args.clips} held-out clips (bench.eval's set)\n")
    header = (
        "| tier | MB | live ms per frame p50 / p99 | offline RTF | onset F1 "
        "| median timing error ms | log-mel distance |"
    )
    if real is not None:
        header += " real F1 +-50 / +-100 ms | real onsets / min on negatives |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|", flush=True)
    for folder in args.tiers:
        settings = Settings(models_dir=folder.parent, window_memo=False)
        engine = FoleyEngine.load(settings, folder.name)
        engine.warmup()
        p50, p99 = live_frame_ms(engine)
        rtf = offline_rtf(engine)
        tally = evaluate(engine, args.clips, 5.0, material_clips=0)
        score = combined(tally.scores)
        errors = np.abs(score.errors_s) * 1000
        mel = tally.distances()["model"].log_mel
        size = sum(f.stat().st_size for f in folder.glob("*.onnx")) / 1e6
        row = (
            f"| {folder.name} | {size:.1f} | {p50:.2f} / {p99:.2f} | {rtf:.4f} | {score.f1:.3f} "
            f"| {np.median(errors):.1f} | {mel:.3f} |"
        )
        if real is not None:
            detector = {folder.name: tier_detector(folder.name, folder.parent)}
            (report,) = measure(detector, ("rendered",), real)
            row += (
                f" {report.f1_50ms:.3f} / {report.f1_100ms:.3f} | {report.negatives_per_min:.1f} |"
            )
        print(row, flush=True)  # each as it is measured: a long run that stops keeps its rows


if __name__ == "__main__":
    main()
