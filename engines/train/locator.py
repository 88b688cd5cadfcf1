"""Train the visual encoder's keypoint locator on its own, before the generator learns to read it.

    python -m engines.train.locator CKPT OUT.pt --data data/train --val data/val

The locator (VisualEncoder, `keypoints`) reads the encoder's patch embeddings without training
them, so it learns apart from everything else: here on the keypoint targets alone
(engines.train.keypoints), on short augmented crops, many times faster than a generator round.
OUT is CKPT with keypoints added to its encoder (or its locator trained further); their
projection into the features is left as it was (at zero when new), so OUT computes what CKPT
did until a generator round (`engines.train.train --init-from OUT --keypoint-weight W`) teaches
the generator to read them.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from pathlib import Path

import torch

from engines.models.checkpoint import checkpoint_config, load_checkpoint, save_checkpoint
from engines.train.data import TrainClip, load_clips
from engines.train.keypoints import keypoint_loss, picture_positions
from engines.train.train import (
    _crop_starts,
    _screens,
    augment,
    one_cycle,
    optimizer_step,
    validation_keypoints,
)

log = logging.getLogger(__name__)


def train_locator(
    encoder: torch.nn.Module,
    clips: list[TrainClip],
    *,
    steps: int,
    batch: int = 16,
    frames: int = 8,
    lr: float = 3e-3,
    augment_p: float = 0.7,
    seed: int = 0,
    val: list[TrainClip] | None = None,
) -> torch.nn.Module:
    """Trains `encoder.locate` alone on crops of `frames` frames, flipped and augmented as in a
    generator round; logs the validation keypoint error every 1000 steps and at the end."""
    encoder.train()
    params = list(encoder.locate.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=1e-4)
    scheduler = one_cycle(optimizer, steps)
    gen = torch.Generator().manual_seed(seed)
    started = time.perf_counter()
    for step in range(steps):
        picks = _crop_starts(clips, batch, frames, gen, False)
        rgb = torch.stack([c.rgb[s : s + frames] for c, s in picks])
        flip = torch.rand(len(picks), generator=gen) < 0.5
        rgb = torch.where(flip[:, None, None, None, None], rgb.flip(3), rgb)
        pictures, scale, shift = augment(rgb.permute(0, 1, 4, 2, 3).float() / 255.0, augment_p, gen)
        positions = picture_positions(_screens(picks, frames)[:, 1:-1], flip, scale, shift)
        loss = keypoint_loss(*encoder.locate_keypoints(pictures), positions)
        if loss.requires_grad:  # else no object was in the picture: nothing to learn
            optimizer_step(optimizer, scheduler, loss)
        if step % 200 == 0:
            log.info(
                "locator step %d loss %.3f (%.0f s)",
                step,
                loss.item(),
                time.perf_counter() - started,
            )
        if val and (step % 1000 == 999 or step == steps - 1):
            log.info(
                "locator step %d validation keypoint error: median %.2f model pixels",
                step,
                validation_keypoints(locate_all(encoder.eval(), val), val),
            )
            encoder.train()
    return encoder.eval()


def locate_all(encoder: torch.nn.Module, clips: list[TrainClip]) -> list[torch.Tensor]:
    """The encoder's keypoints [1, T, K, 3] over each whole clip (without its features)."""
    with torch.no_grad():
        return [
            encoder.locate_keypoints(clip.rgb.permute(0, 3, 1, 2).float()[None] / 255.0)[0]
            for clip in clips
        ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--val", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N clips")
    parser.add_argument(
        "--keypoints",
        type=int,
        default=3,
        help="when CKPT's encoder has none (at least the most objects in a clip)",
    )
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = checkpoint_config(args.checkpoint)
    if not cfg.encoder_keypoints:
        cfg = dataclasses.replace(cfg, encoder_keypoints=args.keypoints)
    _, trained, generator, vocoder = load_checkpoint(args.checkpoint)
    encoder = cfg.build()[0]
    encoder.load_state_dict(trained.state_dict(), strict=False)
    clips = load_clips(args.data, cfg, args.limit)
    val = load_clips(args.val, cfg) if args.val else None
    train_locator(encoder, clips, steps=args.steps, lr=args.lr, val=val)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(args.out, cfg, encoder, generator, vocoder)
    log.info("saved %s", args.out)


if __name__ == "__main__":
    main()
