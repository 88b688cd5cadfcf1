"""Vocoder distillation: a large teacher trained on the simulated sound, and the service's compact
vocoder (the student) trained from the teacher's outputs.

    python -m engines.train.vocoder teacher --data data/train --limit 1200 --steps 3000 \\
        --lr 1e-3 --crop-mels 48 --out runs/teacher.pt
    python -m engines.train.vocoder student --data data/train --teacher runs/teacher.pt \\
        --into runs/preview/model.pt --out runs/distilled/model.pt
    python -m engines.train.vocoder swap --vocoder-from runs/distilled/model.pt \\
        --into runs/other/model.pt --out runs/other-distilled/model.pt --val data/val

`teacher` trains engines.models.teacher on ground-truth mel -> ground-truth audio (multi-resolution
STFT + mel L1). `student` trains a vocoder of the service's form (engines.models.vocoder, causal,
streamed) on the same mels, with the teacher's audio for each clip as its target (without
`--teacher`: the ground-truth audio, the baseline that shows what distillation adds). Its losses
are the teacher's plus, from `--adversarial-from` on, an adversary (engines.models.discriminator:
least-squares GAN and feature matching) that tells the student's audio from its target. The
student is written into a copy of the `--into` checkpoint in place of its vocoder (with `--val`,
the onset trigger recalibrated for it), so engines.export.onnx_export makes a tier of it as of
any checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from engines.models.checkpoint import (
    checkpoint_config,
    load_checkpoint,
    load_stage,
    save_checkpoint,
)
from engines.models.config import ModelConfig
from engines.models.discriminator import (
    MultiResolutionDiscriminator,
    discriminator_loss,
    generator_losses,
)
from engines.models.mel import LogMel
from engines.models.teacher import TeacherConfig, TeacherVocoder, load_teacher, save_teacher
from engines.train.calibration import calibrate_trigger
from engines.train.data import load_clips, log_mel
from engines.train.losses import multi_resolution_stft_loss
from engines.train.optim import one_cycle, optimizer_step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sound:
    """One clip's sound: the waveform, a whole number of mel hops long, and its log-mel."""

    audio: torch.Tensor  # (M * hop,) float32
    mel: torch.Tensor  # (M, n_mels) float32


def load_sounds(data_dir: Path, cfg: ModelConfig, limit: int | None = None) -> list[Sound]:
    """The sound of the first `limit` clips of a dataset folder (engines.data.dataset), without
    their frames."""
    paths = sorted(data_dir.glob("clip_*.npz"))[:limit]
    if not paths:
        raise FileNotFoundError(f"no clips in {data_dir}")
    mel = log_mel(cfg)
    sounds = []
    for path in paths:
        with np.load(path) as z:
            if int(z["sample_rate"]) != cfg.sample_rate:
                raise ValueError(f"{path}: {int(z['sample_rate'])} Hz, not {cfg.sample_rate}")
            audio = z["audio"].astype(np.float32)
        audio = torch.from_numpy(audio[: len(audio) // cfg.hop * cfg.hop].copy())
        with torch.no_grad():
            sounds.append(Sound(audio, mel(audio[None])[0]))
    return sounds


@dataclass(frozen=True)
class Recipe:
    steps: int = 2000
    batch: int = 12
    crop_mels: int = 96  # mel frames per crop (0.8 s)
    lr: float = 2e-3
    mel_weight: float = 0.5
    # The adversary: on from this step (0 = from the start; >= steps = never), on the first
    # `adversarial_batch` crops of each batch.
    adversarial_from: int = 1500
    adversarial_batch: int = 4
    # HiFi-GAN and Vocos weigh their mel loss about 45: the adversary's terms are a fifth to a
    # tenth of the spectral loss there, and are here.
    adversarial_weight: float = 0.1
    matching_weight: float = 0.2
    seed: int = 0


def crops(
    sounds: list[Sound],
    targets: list[torch.Tensor],
    recipe: Recipe,
    hop: int,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of (mel [B, crop_mels, n_mels], target audio [B, crop_mels * hop]), at random
    places in random clips, four in five of them with some sound in them."""
    mels, audio = [], []
    while len(mels) < recipe.batch:
        i = int(torch.randint(len(sounds), (1,), generator=gen))
        mel = sounds[i].mel
        if len(mel) <= recipe.crop_mels:
            continue
        s = int(torch.randint(len(mel) - recipe.crop_mels, (1,), generator=gen))
        window = mel[s : s + recipe.crop_mels]
        if float(torch.rand(1, generator=gen)) < 0.8 and window.max() < -9.0:
            continue
        mels.append(window)
        audio.append(targets[i][s * hop : (s + recipe.crop_mels) * hop])
    return torch.stack(mels), torch.stack(audio)


def spectral_loss(
    pred: torch.Tensor, target: torch.Tensor, mel: LogMel, weight: float
) -> torch.Tensor:
    return multi_resolution_stft_loss(pred, target) + weight * F.l1_loss(mel(pred), mel(target))


def fit(
    model: nn.Module,
    sounds: list[Sound],
    targets: list[torch.Tensor],
    cfg: ModelConfig,
    recipe: Recipe,
    name: str,
) -> nn.Module:
    """Train `model` (mel -> audio) towards `targets` (one waveform per sound)."""
    torch.manual_seed(recipe.seed)
    gen = torch.Generator().manual_seed(recipe.seed)
    mel = log_mel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.8, 0.99))
    scheduler = one_cycle(optimizer, recipe.steps)
    adversary = MultiResolutionDiscriminator()
    adversary_opt = torch.optim.AdamW(adversary.parameters(), lr=recipe.lr, betas=(0.8, 0.99))
    model.train()
    started = time.perf_counter()
    for step in range(recipe.steps):
        mels, target = crops(sounds, targets, recipe, cfg.hop, gen)
        pred = model(mels)
        loss = spectral_loss(pred, target, mel, recipe.mel_weight)
        spectral = loss.item()
        adversarial = step >= recipe.adversarial_from
        if adversarial:
            real, fake = target[: recipe.adversarial_batch], pred[: recipe.adversarial_batch]
            d_loss = discriminator_loss(adversary(real), adversary(fake.detach()))
            adversary_opt.zero_grad()
            d_loss.backward()
            adversary_opt.step()
            g_adv, g_match = generator_losses(adversary(real), adversary(fake))
            loss = loss + recipe.adversarial_weight * g_adv + recipe.matching_weight * g_match
        optimizer_step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == recipe.steps - 1:
            log.info(
                "%s step %d spectral loss %.4f%s (%.0f s)",
                name,
                step,
                spectral,
                f", adversary {d_loss.item():.3f}" if adversarial else "",
                time.perf_counter() - started,
            )
    return model.eval()


def teacher_audio(teacher: TeacherVocoder, sounds: list[Sound]) -> list[torch.Tensor]:
    """The teacher's rendering of each whole clip: the student's targets."""
    with torch.no_grad():
        return [teacher(s.mel[None])[0] for s in sounds]


def write(
    args: argparse.Namespace,
    cfg: ModelConfig,
    encoder: nn.Module,
    generator: nn.Module,
    vocoder: nn.Module,
) -> None:
    """Save the checkpoint with `vocoder`, its onset trigger first recalibrated on `--val`."""
    if args.val is not None:
        calibrate_trigger(encoder, generator, vocoder, load_clips(args.val, cfg), cfg)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(args.out, cfg, encoder, generator, vocoder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("teacher", "student"):
        p = sub.add_parser(name)
        p.add_argument("--data", type=Path, default=Path("data/train"))
        p.add_argument("--limit", type=int, default=600, help="use the first N clips")
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--steps", type=int, default=Recipe.steps)
        p.add_argument("--lr", type=float, default=Recipe.lr)
        p.add_argument(
            "--crop-mels", type=int, default=Recipe.crop_mels, help="mel frames per crop"
        )
        p.add_argument(
            "--adversarial-from",
            type=int,
            default=None,
            help="step the adversary starts at (teacher default: never; student: 3/4 of the way)",
        )
    swap = sub.add_parser(
        "swap", help="write one checkpoint's vocoder into another (e.g. a student, once trained)"
    )
    swap.add_argument("--vocoder-from", type=Path, required=True)
    swap.add_argument("--into", type=Path, required=True)
    swap.add_argument("--out", type=Path, required=True)
    t = sub.choices["teacher"]
    for field in ("dim", "hidden", "blocks"):
        t.add_argument(f"--{field}", type=int, default=getattr(TeacherConfig, field))
    s = sub.choices["student"]
    s.add_argument(
        "--into", type=Path, required=True, help="the checkpoint whose vocoder it replaces"
    )
    s.add_argument(
        "--teacher", type=Path, default=None, help="distil from it (default: ground truth)"
    )
    for command in (s, swap):
        command.add_argument(
            "--val",
            type=Path,
            default=None,
            help="clips (with frames) to recalibrate the onset trigger on with the new vocoder "
            "(engines.train.calibration.calibrate_trigger); default: keep the --into checkpoint's",
        )
    s.add_argument("--dim", type=int, default=128)
    s.add_argument("--hidden", type=int, default=384)
    s.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()

    if args.command == "teacher":
        cfg = ModelConfig()
        sounds = load_sounds(args.data, cfg, args.limit)
        model = TeacherVocoder(
            TeacherConfig(cfg.n_mels, cfg.hop, args.dim, args.hidden, args.blocks)
        )
        never = args.steps
        recipe = Recipe(
            steps=args.steps,
            lr=args.lr,
            crop_mels=args.crop_mels,
            adversarial_from=never if args.adversarial_from is None else args.adversarial_from,
        )
        fit(model, sounds, [s.audio for s in sounds], cfg, recipe, "teacher")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        save_teacher(args.out, model)
    elif args.command == "swap":
        base, encoder, generator, _ = load_checkpoint(args.into)
        cfg = base.with_vocoder_of(checkpoint_config(args.vocoder_from))
        write(args, cfg, encoder, generator, load_stage(args.vocoder_from, "vocoder"))
    else:
        base, encoder, generator, _ = load_checkpoint(args.into)
        cfg = dataclasses.replace(
            base, vocoder_dim=args.dim, vocoder_hidden=args.hidden, vocoder_blocks=args.blocks
        )
        sounds = load_sounds(args.data, cfg, args.limit)
        targets = (
            teacher_audio(load_teacher(args.teacher), sounds)
            if args.teacher
            else [s.audio for s in sounds]
        )
        log.info("targets ready (%.0f s)", time.perf_counter() - started)
        _, _, model = cfg.build()
        late = args.steps * 3 // 4
        recipe = Recipe(
            steps=args.steps,
            lr=args.lr,
            crop_mels=args.crop_mels,
            adversarial_from=late if args.adversarial_from is None else args.adversarial_from,
        )
        fit(model, sounds, targets, cfg, recipe, "student")
        write(args, cfg, encoder, generator, model)
    log.info("saved %s (%.0f s)", args.out, time.perf_counter() - started)


if __name__ == "__main__":
    main()
