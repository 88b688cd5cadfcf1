"""Speed against quality for model tiers (the Pareto table of the compression work).

    python -m bench.tiers engines/artifacts/preview engines/artifacts/preview-int8 [--clips 24]

For each tier folder: live compute per 30 fps frame (one frame per call, as a preview session
runs it; p50 and p99 over a 10 s clip), the offline real-time factor of bench.offline's 10 s
720p clip (end to end to WAV, median of 3), and on bench.eval's held-out set: onset F1, median
timing error and log-mel distance to the ground truth. All tiers run in one process, in turn.
The quality needs the simulator and torch; they are imported only once the speed is measured.
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
from service.pipeline.preprocess import ModelFrames, resample_clip
from service.pipeline.streaming import StreamRunner
from service.pipeline.types import RenderOptions


def live_frame_ms(engine: FoleyEngine) -> tuple[float, float]:
    from engines.data.dataset import make_clip

    tier = engine.tier
    record = make_clip(
        20_002, duration_s=10.0, fps=30, model_width=tier.width, model_height=tier.height
    )
    frames = resample_clip(record.times_s, record.frames, fps=tier.fps, num_frames=300)
    runner = StreamRunner(tier, engine.backend)
    stream = runner.open()
    times = []
    for k in range(len(frames)):
        start = time.perf_counter()
        runner.push([stream], [ModelFrames(k, frames.rgb[k : k + 1], frames.age[k : k + 1])])
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times[10:], 50)), float(np.percentile(times[10:], 99))


def offline_rtf(engine: FoleyEngine) -> float:
    clip = bench_clip()
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            raw = RenderOptions(format="wav", loudness_lufs=None)  # the model's own cost
            engine.render(clip, Path(tmp) / "out.wav", raw)
            runs.append(time.perf_counter() - start)
    return statistics.median(runs) / CLIP_SECONDS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tiers", type=Path, nargs="+", help="tier folders")
    parser.add_argument("--clips", type=int, default=24, help="held-out clips for the quality")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # Here, not at the top: the decoder's children import this program's main module
    # (multiprocessing's rule), and torch there would add a second to every render timed.
    from bench.eval import run as evaluate
    from engines.eval.onsets import combined

    rows = []
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
        rows.append(
            f"| {folder.name} | {size:.1f} | {p50:.2f} / {p99:.2f} | {rtf:.4f} | {score.f1:.3f} "
            f"| {np.median(errors):.1f} | {mel:.3f} |"
        )
    print(describe())
    print(f"quality on {args.clips} held-out clips (bench.eval's set)\n")
    print(
        "| tier | MB | live ms per frame p50 / p99 | offline RTF | onset F1 "
        "| median timing error ms | log-mel distance |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
