"""Build a `motion` tier from scratch: data, the contact head, its export, its measures.

    python -m engines.build_motion [--work runs/motion] [--out runs/motion/tier] \
        [--sprites 3000] [--bullet 500] [--steps 15000] [--threshold 0.5] [--device cpu]

Every step caches what it makes, so a stopped build continues where it was:

1. features of SPRITES procedural clips (engines.sim.sprites) and BULLET pybullet clips, one
   file per clip under data/motion/ (engines.motion.data), plus held-out sets of each;
2. the head, checkpointed every 500 steps (engines.motion.train): a stopped run resumes;
3. the vocoder: impacts of simulated scenes, its teacher and the distilled student
   (engines.motion.train_vocoder, checkpointed under runs/vocoder/);
4. the tier exported to `--out` (engines.motion.export) with `--threshold` and `--offset-ms`,
   the two numbers the real clips may calibrate (`python -m engines.motion.evaluate --real`);
5. the fired-event F1 on the held-out sets at a few thresholds.

On a 2-core CPU: about 35 minutes of features (2 workers), 17 minutes of training the head, and
20 for the vocoder (its data 4, teacher 9, student 6).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import torch

from engines.motion import data, evaluate, export, train, train_vocoder

log = logging.getLogger(__name__)
DATA = Path("data/motion")
HELD_OUT = {"sprites": range(900000, 900100), "bullet": range(100000, 100080)}
THRESHOLDS = [0.4, 0.5, 0.6, 0.7]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/motion"))
    parser.add_argument("--out", type=Path, default=Path("runs/motion/tier"))
    parser.add_argument("--sprites", type=int, default=3000)
    parser.add_argument("--bullet", type=int, default=500)
    parser.add_argument("--steps", type=int, default=15000)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--offset-ms", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    for source, count in (("sprites", args.sprites), ("bullet", args.bullet)):
        data.build(source, DATA / source, range(count), args.workers)
        data.build(source, DATA / f"val_{source}", HELD_OUT[source], args.workers)
    checkpoint = args.work / "head.pt"
    train.main(
        [
            *("--data", str(DATA / "sprites"), "--data", str(DATA / "bullet")),
            *("--out", str(checkpoint), "--steps", str(args.steps)),
            *("--device", args.device),
        ]
    )
    for step in ("data", "teacher", "student"):
        train_vocoder.main([step])
    model = evaluate.load_model(checkpoint)
    export.export(
        model,
        args.out,
        threshold=args.threshold,
        offset_s=args.offset_ms / 1000,
        reference_strength=export.REFERENCE_STRENGTH["trained"],
        vocoder=train_vocoder.RUNS / "student.pt",
    )
    torch.set_num_threads(1)
    head = evaluate.torch_head(model)
    for source in HELD_OUT:
        print(f"held-out {source}:")
        evaluate.score_features(data.load_dir(DATA / f"val_{source}"), head, THRESHOLDS)
    log.info("built %s in %.0f min", args.out, (time.perf_counter() - started) / 60)


if __name__ == "__main__":
    main()
