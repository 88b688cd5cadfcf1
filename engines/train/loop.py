"""The training loops: the vocoder on ground-truth mel -> ground-truth waveform; the encoder and
generator together on frames -> ground-truth mel (+ onset heads, + impact levels); and `train`,
which runs both, calibrates the onset trigger and saves the checkpoint."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from engines.models.checkpoint import checkpoint_config, load_stage, save_checkpoint
from engines.models.config import ModelConfig
from engines.train.calibration import calibrate_trigger, clip_heads, onset_score
from engines.train.crops import augment, crop_starts
from engines.train.data import TrainClip, load_clips, log_mel
from engines.train.distractors import distractor_clip
from engines.train.losses import level_loss, multi_resolution_stft_loss, onset_losses
from engines.train.optim import one_cycle, optimizer_step
from engines.train.options import TrainOptions

log = logging.getLogger(__name__)


def warm_start(module: torch.nn.Module, checkpoint: Path, name: str) -> None:
    """Copy the checkpoint stage's tensors whose names and shapes match (new heads start fresh).
    A convolution kernel that grew by taps at its end (more lookahead) takes the checkpoint's as
    its first taps, the new ones zero: the stage starts out computing what the checkpoint's did."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)[name]
    own = module.state_dict()
    same = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    for k, v in state.items():
        mine = own.get(k)
        longer = mine is not None and mine.dim() == v.dim() == 3 and k not in same
        if longer and mine.shape[:2] == v.shape[:2] and mine.shape[2] > v.shape[2]:
            same[k] = torch.cat([v, v.new_zeros(*v.shape[:2], mine.shape[2] - v.shape[2])], 2)
    module.load_state_dict(same, strict=False)
    log.info("%s: %d of %d tensors from %s", name, len(same), len(own), checkpoint)


def train_vocoder(clips: list[TrainClip], cfg: ModelConfig, opts: TrainOptions) -> torch.nn.Module:
    _, _, vocoder = cfg.build()
    mel = log_mel(cfg)
    spf = cfg.sample_rate // cfg.fps
    optimizer = torch.optim.AdamW(vocoder.parameters(), lr=opts.lr, betas=(0.8, 0.99))
    scheduler = one_cycle(optimizer, opts.vocoder_steps)
    gen = torch.Generator().manual_seed(opts.seed)
    started = time.perf_counter()
    for step in range(opts.vocoder_steps):
        picks = crop_starts(clips, opts.vocoder_batch, opts.vocoder_crop_frames, gen, True)
        audio = torch.stack(
            [c.audio[s * spf : (s + opts.vocoder_crop_frames) * spf] for c, s in picks]
        )
        r = cfg.mels_per_frame
        target_mel = torch.stack(
            [c.mel[s * r : (s + opts.vocoder_crop_frames) * r] for c, s in picks]
        )
        pred = vocoder(target_mel)
        loss = multi_resolution_stft_loss(pred, audio) + F.l1_loss(mel(pred), target_mel) * 0.5
        optimizer_step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.vocoder_steps - 1:
            log.info(
                "vocoder step %d loss %.4f (%.0f s)",
                step,
                loss.item(),
                time.perf_counter() - started,
            )
    return vocoder.eval()


def _levels(clip: TrainClip) -> torch.Tensor:
    if clip.impact_level is None:
        raise ValueError("level_weight needs clips loaded with levels=True")
    return clip.impact_level


def train_generator(
    clips: list[TrainClip],
    cfg: ModelConfig,
    opts: TrainOptions,
    init_from: Path | None = None,
    val: list[TrainClip] | None = None,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Encoder and generator together; `init_from` starts from a checkpoint's weights (those
    that fit). `val` clips report the onset F1 every 500 steps."""
    encoder, generator, _ = cfg.build()
    if init_from is not None:
        warm_start(encoder, init_from, "encoder")
        warm_start(generator, init_from, "generator")
    params = [*encoder.parameters(), *generator.parameters()]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=1e-4)
    scheduler = one_cycle(optimizer, opts.generator_steps)
    gen = torch.Generator().manual_seed(opts.seed + 1)
    r, n = cfg.mels_per_frame, opts.crop_frames
    pool = None
    if opts.distractor_p > 0:
        pool_gen = torch.Generator().manual_seed(opts.seed + 2)
        pool = [
            distractor_clip(n, cfg.height, cfg.width, pool_gen) for _ in range(opts.distractor_pool)
        ]
    started = time.perf_counter()
    for step in range(opts.generator_steps):
        picks = crop_starts(clips, opts.generator_batch, n, gen, True)
        rgb = torch.stack([c.rgb[s : s + n] for c, s in picks])
        # Crops replaced by a scene where nothing sounds: silence and no contact as targets.
        silent = torch.zeros(len(picks), dtype=torch.bool)
        if pool is not None:
            silent = torch.rand(len(picks), generator=gen) < opts.distractor_p
            for i in torch.nonzero(silent).flatten().tolist():
                rgb[i] = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        # A mirrored scene sounds the same (mono): half the crops are flipped left-right.
        flip = torch.rand(len(picks), generator=gen) < 0.5
        rgb = torch.where(flip[:, None, None, None, None], rgb.flip(3), rgb)
        frames = augment(rgb.permute(0, 1, 4, 2, 3).float() / 255.0, opts.augment_p, gen)
        age = torch.stack([c.age[s : s + n] for c, s in picks])
        target = torch.stack([c.mel[s * r : (s + n) * r] for c, s in picks])
        onset = torch.stack([c.onset[s * r : (s + n) * r] for c, s in picks])
        target[silent] = math.log(cfg.log_floor)
        onset[silent] = 0.0
        x, onset_logit, offset_logit = generator.heads(encoder(frames, age))
        # Teacher forcing: the ground-truth contact frames fire the events.
        mel, _ = generator.render(x, onset_logit, offset_logit, events=onset)
        w = opts.warmup_frames * r
        mel_loss = F.l1_loss(mel[:, w:], target[:, w:])
        onset_loss = onset_losses(onset_logit, offset_logit, onset, r)
        loss = mel_loss + opts.onset_weight * onset_loss
        e_loss = torch.zeros(())
        if opts.level_weight > 0:
            levels = torch.stack([_levels(c)[s * r : (s + n) * r] for c, s in picks])
            levels[silent] = float("nan")  # a distractor crop has no impact
            e_loss = level_loss(generator.event_level(x), levels)
            loss = loss + opts.level_weight * e_loss
        optimizer_step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.generator_steps - 1:
            log.info(
                "generator step %d mel %.4f onset %.4f level %.4f (%.0f s)",
                step,
                mel_loss.item(),
                onset_loss.item(),
                e_loss.item(),
                time.perf_counter() - started,
            )
        if val and (step % 500 == 499 or step == opts.generator_steps - 1):
            heads = clip_heads(encoder.eval(), generator.eval(), val)
            score = onset_score(generator, heads, val, cfg)
            log.info(
                "generator step %d validation onset F1 %.3f (P %.3f, R %.3f)",
                step,
                score.f1,
                score.precision,
                score.recall,
            )
            encoder.train()
            generator.train()
    return encoder.eval(), generator.eval()


def train(
    data_dir: Path,
    out_dir: Path,
    cfg: ModelConfig,
    opts: TrainOptions,
    limit: int | None = None,
    vocoder_from: Path | None = None,
    init_from: Path | None = None,
    val_dir: Path | None = None,
) -> Path:
    """Train every stage and save a checkpoint. `vocoder_from` reuses a checkpoint's vocoder;
    `init_from` continues training its encoder and generator. The onset trigger is calibrated
    on the clips of `val_dir` (a tenth of the training clips without one)."""
    torch.manual_seed(opts.seed)
    clips = load_clips(
        data_dir, cfg, limit, seen_impacts=opts.seen_impacts, levels=opts.level_weight > 0
    )
    val = load_clips(val_dir, cfg, seen_impacts=opts.seen_impacts) if val_dir else None
    if vocoder_from is None:
        vocoder = train_vocoder(clips, cfg, opts)
    else:
        vocoder = load_stage(vocoder_from, "vocoder")
        # A distilled vocoder may differ in size.
        cfg = cfg.with_vocoder_of(checkpoint_config(vocoder_from))
    encoder, generator = train_generator(clips, cfg, opts, init_from, val)
    calibrate_trigger(encoder, generator, vocoder, val or clips[: max(1, len(clips) // 10)], cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = save_checkpoint(out_dir / "model.pt", cfg, encoder, generator, vocoder)
    log.info("saved %s", checkpoint)
    return checkpoint
