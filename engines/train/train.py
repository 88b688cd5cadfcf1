"""Train the reference model's three stages on simulated clips.

    python -m engines.train.train --data data/train --val data/val --out runs/preview

The vocoder learns ground-truth mel -> ground-truth waveform; the encoder and generator learn
frames -> ground-truth mel (+ onset probability). They train separately, then chain at inference
(engines.train.loop). The defaults are one round of the shipped weights' recipe
(engines.train.options).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

import torch

from engines.models.checkpoint import checkpoint_config
from engines.models.config import ModelConfig
from engines.train.loop import train
from engines.train.options import TrainOptions

__all__ = ["TrainOptions", "main", "train"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("data/train"))
    parser.add_argument("--out", type=Path, default=Path("runs/preview"))
    parser.add_argument("--vocoder-steps", type=int, default=TrainOptions.vocoder_steps)
    parser.add_argument("--generator-steps", type=int, default=TrainOptions.generator_steps)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N clips")
    parser.add_argument(
        "--vocoder-from",
        type=Path,
        default=None,
        help="reuse the vocoder of this checkpoint instead of training one",
    )
    parser.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="continue training this checkpoint's encoder and generator",
    )
    parser.add_argument("--lr", type=float, default=TrainOptions.lr)
    parser.add_argument(
        "--onset-weight",
        type=float,
        default=TrainOptions.onset_weight,
        help="weight of the onset heads' loss against the mel loss",
    )
    parser.add_argument(
        "--level-weight",
        type=float,
        default=TrainOptions.level_weight,
        help="weight of the impact events' level loss (with --seen-impacts); 0 = off",
    )
    parser.add_argument(
        "--seen-impacts",
        action=argparse.BooleanOptionalAction,
        default=TrainOptions.seen_impacts,
        help="onset targets on every impact of at least 0.02 N s, heard or not (else only the "
        "contacts heard in the track)",
    )
    parser.add_argument(
        "--distractors",
        type=float,
        default=TrainOptions.distractor_p,
        help="share of crops replaced by procedural scenes where nothing sounds; 0 = off",
    )
    parser.add_argument(
        "--encoder-channels",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        default=None,
        help="the visual encoder's widths, comma-separated (patch embedding first); default: "
        "those of --init-from, else the reference model's",
    )
    parser.add_argument("--feature-dim", type=int, default=ModelConfig.feature_dim)
    parser.add_argument(
        "--lookahead",
        type=int,
        default=ModelConfig.generator_lookahead,
        help="video frames the generator sees past the one it renders",
    )
    parser.add_argument(
        "--val", type=Path, default=None, help="clips (not trained on) to calibrate and report on"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    opts = TrainOptions(
        vocoder_steps=args.vocoder_steps,
        generator_steps=args.generator_steps,
        lr=args.lr,
        onset_weight=args.onset_weight,
        seen_impacts=args.seen_impacts,
        level_weight=args.level_weight,
        distractor_p=args.distractors,
    )
    cfg = ModelConfig(feature_dim=args.feature_dim, generator_lookahead=args.lookahead)
    if args.init_from is not None:  # a pruned checkpoint (engines.export.prune) stays pruned
        start = checkpoint_config(args.init_from)
        cfg = dataclasses.replace(
            cfg,
            generator_expand=start.generator_expand,
            encoder_channels=start.encoder_channels,
        )
    if args.encoder_channels is not None:
        cfg = dataclasses.replace(cfg, encoder_channels=args.encoder_channels)
    train(
        args.data,
        args.out,
        cfg,
        opts,
        args.limit,
        args.vocoder_from,
        args.init_from,
        args.val,
    )


if __name__ == "__main__":
    main()
