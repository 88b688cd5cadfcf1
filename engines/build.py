"""Rebuild the tiers from scratch: simulate the data, train, prune, export.

    python -m engines.build     # service/models/export and service/models/preview

The recipe: 2400 simulated clips, and 240 more (other seeds) to calibrate the onset trigger on and
report validation F1; the vocoder on ground-truth mels; the encoder and generator, with onset
targets on every seen impact and each impact event's level learned from its own sound, a tenth
of the crops replaced by procedural scenes where nothing sounds (engines.train.distractors), in
rounds of `--generator-steps`, each continuing from the last with a fresh one-cycle schedule
(warm restarts); the onset trigger calibrated after each round. That model is the `export`
tier. The `preview` tier is the same model with half its encoder channels and generator hidden
units pruned away (engines.export.prune), fine-tuned for `--prune-steps` more with the same
recipe at a lower rate (docs/model-card.md, Compression). Last, each tier's live gain is
calibrated against its offline renders (engines.eval.loudness) and each stage's GPU precision
chosen (engines.eval.precision). Deterministic per seed. The README
states how long each step takes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from engines.data.dataset import write_dataset
from engines.eval import loudness, precision
from engines.export.onnx_export import export_tier
from engines.export.prune import prune
from engines.models.checkpoint import checkpoint_config
from engines.models.config import ModelConfig
from engines.train.train import TrainOptions, train
from service.config import SHIPPED_MODELS_DIR

log = logging.getLogger(__name__)
ARTIFACTS = SHIPPED_MODELS_DIR
ROUND_LRS = (2e-3, 1e-3)
# `preview`: the share of each pruned layer kept, and the fine-tuning's learning rate.
PRUNE_KEEP = 0.5
PRUNE_LR = 5e-4


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clips", type=int, default=2400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("data"))
    parser.add_argument(
        "--out", type=Path, default=ARTIFACTS, help="where the tier folders go (export, preview)"
    )
    parser.add_argument("--vocoder-steps", type=int, default=TrainOptions.vocoder_steps)
    parser.add_argument(
        "--generator-steps", type=int, default=TrainOptions.generator_steps, help="steps per round"
    )
    parser.add_argument(
        "--prune-steps", type=int, default=1000, help="fine-tuning steps of the pruned preview"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    data, val = args.work / "train", args.work / "val"
    write_dataset(data, n_clips=args.clips, seed=args.seed)
    write_dataset(val, n_clips=max(1, args.clips // 10), seed=args.seed + 1)
    log.info("data: %.0f s", time.perf_counter() - started)
    runs = args.work / "runs"
    checkpoint = None
    for i, lr in enumerate(ROUND_LRS):
        opts = _recipe(args.vocoder_steps if i == 0 else 0, args.generator_steps, lr, args.seed + i)
        checkpoint = train(
            data,
            runs / f"round_{i}",
            ModelConfig(),
            opts,
            vocoder_from=checkpoint,
            init_from=checkpoint,
            val_dir=val,
        )
        log.info("round %d: %.0f s", i, time.perf_counter() - started)
    assert checkpoint is not None
    export_tier(checkpoint, args.out / "export", name="export")
    pruned = prune(checkpoint, runs / "pruned.pt", keep=PRUNE_KEEP, encoder_keep=PRUNE_KEEP)
    opts = _recipe(0, args.prune_steps, PRUNE_LR, args.seed + len(ROUND_LRS))
    tuned = train(
        data,
        runs / "preview",
        checkpoint_config(pruned),
        opts,
        vocoder_from=checkpoint,
        init_from=pruned,
        val_dir=val,
    )
    export_tier(tuned, args.out / "preview", name="preview")
    loudness.main(["--models", str(args.out), "--tiers", "export", "preview", "--write"])
    precision.main(["--models", str(args.out), "--tiers", "export", "preview", "--write"])
    log.info("total: %.0f s", time.perf_counter() - started)


def _recipe(vocoder_steps: int, generator_steps: int, lr: float, seed: int) -> TrainOptions:
    """The shipped weights' recipe (docs/model-card.md)."""
    return TrainOptions(
        vocoder_steps=vocoder_steps,
        generator_steps=generator_steps,
        lr=lr,
        seed=seed,
        seen_impacts=True,
        level_weight=0.2,
        distractor_p=0.1,
    )


if __name__ == "__main__":
    main()
