"""Train the reference model's three stages on simulated clips.

    python -m engines.train.train --data data/train --out runs/preview

The vocoder learns ground-truth mel -> ground-truth waveform; the encoder and generator learn
frames -> ground-truth mel (+ onset probability). They train separately, then chain at inference.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from engines.models.checkpoint import load_stage, save_checkpoint
from engines.models.config import ModelConfig
from engines.train.data import TrainClip, load_clips, log_mel
from engines.train.losses import multi_resolution_stft_loss

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainOptions:
    vocoder_steps: int = 2000
    generator_steps: int = 3000
    vocoder_batch: int = 12
    generator_batch: int = 8
    crop_frames: int = 80  # video frames per generator crop (2.7 s)
    # The first frames of a crop get no mel loss: ringing from contacts before the crop is in the
    # target but its events are not in the input.
    warmup_frames: int = 16
    onset_weight: float = 1.0
    vocoder_crop_frames: int = 24  # video frames per vocoder crop (0.8 s)
    lr: float = 2e-3
    seed: int = 0


def _crop_starts(
    clips: list[TrainClip], n: int, frames: int, gen: torch.Generator, prefer_sound: bool
) -> list[tuple[TrainClip, int]]:
    picks = []
    while len(picks) < n:
        clip = clips[int(torch.randint(len(clips), (1,), generator=gen))]
        total = len(clip.age)
        if total <= frames:
            continue
        start = int(torch.randint(total - frames, (1,), generator=gen))
        if prefer_sound and float(torch.rand(1, generator=gen)) < 0.8:
            r = clip.mel.shape[0] // total
            if clip.mel[start * r : (start + frames) * r].max() < -9.0:
                continue
        picks.append((clip, start))
    return picks


def _schedule(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=optimizer.param_groups[0]["lr"], total_steps=steps, pct_start=0.05
    )


def _step(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loss: torch.Tensor,
) -> None:
    optimizer.zero_grad()
    loss.backward()
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_norm_(group["params"], 1.0)
    optimizer.step()
    scheduler.step()


def train_vocoder(clips: list[TrainClip], cfg: ModelConfig, opts: TrainOptions) -> torch.nn.Module:
    _, _, vocoder = cfg.build()
    mel = log_mel(cfg)
    spf = cfg.sample_rate // cfg.fps
    optimizer = torch.optim.AdamW(vocoder.parameters(), lr=opts.lr, betas=(0.8, 0.99))
    scheduler = _schedule(optimizer, opts.vocoder_steps)
    gen = torch.Generator().manual_seed(opts.seed)
    started = time.perf_counter()
    for step in range(opts.vocoder_steps):
        picks = _crop_starts(clips, opts.vocoder_batch, opts.vocoder_crop_frames, gen, True)
        audio = torch.stack(
            [c.audio[s * spf : (s + opts.vocoder_crop_frames) * spf] for c, s in picks]
        )
        r = cfg.mels_per_frame
        target_mel = torch.stack(
            [c.mel[s * r : (s + opts.vocoder_crop_frames) * r] for c, s in picks]
        )
        pred = vocoder(target_mel)
        loss = multi_resolution_stft_loss(pred, audio) + F.l1_loss(mel(pred), target_mel) * 0.5
        _step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.vocoder_steps - 1:
            log.info(
                "vocoder step %d loss %.4f (%.0f s)",
                step,
                loss.item(),
                time.perf_counter() - started,
            )
    return vocoder.eval()


def train_generator(
    clips: list[TrainClip], cfg: ModelConfig, opts: TrainOptions, init_from: Path | None = None
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Encoder and generator together; `init_from` continues from a checkpoint's weights."""
    if init_from is None:
        encoder, generator, _ = cfg.build()
    else:
        encoder, generator = load_stage(init_from, "encoder"), load_stage(init_from, "generator")
        encoder.train()
        generator.train()
    params = list(encoder.parameters()) + list(generator.parameters())
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=1e-4)
    scheduler = _schedule(optimizer, opts.generator_steps)
    gen = torch.Generator().manual_seed(opts.seed + 1)
    pos_weight = torch.tensor(5.0)
    r, n = cfg.mels_per_frame, opts.crop_frames
    started = time.perf_counter()
    for step in range(opts.generator_steps):
        picks = _crop_starts(clips, opts.generator_batch, n, gen, True)
        rgb = torch.stack([c.rgb[s : s + n] for c, s in picks])
        # A mirrored scene sounds the same (mono): half the crops are flipped left-right.
        flip = torch.rand(len(picks), generator=gen) < 0.5
        rgb = torch.where(flip[:, None, None, None, None], rgb.flip(3), rgb)
        frames = rgb.permute(0, 1, 4, 2, 3).float() / 255.0
        age = torch.stack([c.age[s : s + n] for c, s in picks])
        target = torch.stack([c.mel[s * r : (s + n) * r] for c, s in picks])
        onset = torch.stack([c.onset[s * r : (s + n) * r] for c, s in picks])
        # Teacher forcing: the ground-truth contact frames fire the events.
        mel, onset_prob = generator(encoder(frames, age), events=onset)
        logits = torch.logit(onset_prob.clamp(1e-6, 1 - 1e-6))
        w = opts.warmup_frames * r
        loss = F.l1_loss(mel[:, w:], target[:, w:]) + opts.onset_weight * (
            F.binary_cross_entropy_with_logits(logits, onset, pos_weight=pos_weight)
        )
        _step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.generator_steps - 1:
            log.info(
                "generator step %d loss %.4f (%.0f s)",
                step,
                loss.item(),
                time.perf_counter() - started,
            )
    return encoder.eval(), generator.eval()


def calibrate_trigger(
    encoder: torch.nn.Module, generator: torch.nn.Module, clips: list[TrainClip], tolerance: int = 2
) -> float:
    """The onset threshold whose rising edges best match the contact frames (F1 within
    `tolerance` acoustic frames) on `clips`; stored in the generator, so exported with it."""
    from engines.eval.onsets import match_onsets

    probs, truths = [], []
    with torch.no_grad():
        for clip in clips:
            frames = clip.rgb.permute(0, 3, 1, 2).float()[None] / 255.0
            _, onset = generator(encoder(frames, clip.age[None]), events=clip.onset[None])
            probs.append(onset[0])
            truths.append(np.flatnonzero(clip.onset.numpy()))
    best = (-1.0, 0.5)
    for threshold in [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]:
        scores = []
        for prob, truth in zip(probs, truths, strict=True):
            above = (prob >= threshold).float()
            rising = above * (1 - F.pad(above, (1, 0))[: len(above)])
            scores.append(match_onsets(np.flatnonzero(rising.numpy()), truth, tolerance))
        tp = sum(x.true_positives for x in scores)
        fp = sum(x.false_positives for x in scores)
        fn = sum(x.false_negatives for x in scores)
        f1 = 2 * tp / max(1, 2 * tp + fp + fn)
        log.info("trigger %.1f: onset-frame F1 %.3f", threshold, f1)
        best = max(best, (f1, threshold))
    generator.trigger.fill_(best[1])
    return best[1]


def train(
    data_dir: Path,
    out_dir: Path,
    cfg: ModelConfig,
    opts: TrainOptions,
    limit: int | None = None,
    vocoder_from: Path | None = None,
    init_from: Path | None = None,
) -> Path:
    """Train every stage and save a checkpoint. `vocoder_from` reuses a checkpoint's vocoder;
    `init_from` continues training its encoder and generator."""
    torch.manual_seed(opts.seed)
    clips = load_clips(data_dir, cfg, limit)
    if vocoder_from is None:
        vocoder = train_vocoder(clips, cfg, opts)
    else:
        vocoder = load_stage(vocoder_from, "vocoder")
    encoder, generator = train_generator(clips, cfg, opts, init_from)
    calibrate_trigger(encoder, generator, clips[: max(1, len(clips) // 10)])
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = save_checkpoint(out_dir / "model.pt", cfg, encoder, generator, vocoder)
    log.info("saved %s", checkpoint)
    return checkpoint


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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    opts = TrainOptions(
        vocoder_steps=args.vocoder_steps, generator_steps=args.generator_steps, lr=args.lr
    )
    train(args.data, args.out, ModelConfig(), opts, args.limit, args.vocoder_from, args.init_from)


if __name__ == "__main__":
    main()
