"""The teacher vocoder against the vocoders distilled from it (and any other checkpoint's).

    python -m bench.vocoder runs/teacher.pt runs/distilled/model.pt engines/... [--clips 60]

The first argument is a teacher (engines.train.vocoder teacher), the rest are model checkpoints
whose vocoder is compared with it. For each: parameters; speed, as milliseconds of compute per
second of 48 kHz audio (torch, batch 1, 10 s of mel in one call, the median of 5 calls, with
torch's threads on this machine); and quality on the ground-truth mels of clips no vocoder was
trained on (the first `--clips` of `--data`): log-mel and multi-resolution STFT distances of the
vocoded audio to the ground-truth audio (engines.eval.quality.spectral_distance), and the
log-mel distance to the teacher's audio (how closely a student imitates it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench.machine import describe
from engines.eval.quality import SpectralDistance, spectral_distance
from engines.models.checkpoint import checkpoint_config, load_stage
from engines.models.config import ModelConfig
from engines.models.teacher import load_teacher
from engines.train.data import log_mel
from engines.train.vocoder import Sound, load_sounds

SPEED_SECONDS = 10.0


@dataclass(frozen=True)
class Row:
    name: str
    parameters: int
    ms_per_second: float
    truth: SpectralDistance
    to_teacher: float  # log-mel distance to the teacher's audio


def ms_per_second(vocoder: nn.Module, cfg: ModelConfig, runs: int = 5) -> float:
    frames = round(SPEED_SECONDS * cfg.sample_rate / cfg.hop)
    mel = torch.randn(1, frames, cfg.n_mels) - 6.0
    times = []
    with torch.inference_mode():
        vocoder(mel)  # warm-up
        for _ in range(runs):
            start = time.perf_counter()
            vocoder(mel)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000 / SPEED_SECONDS


def render(vocoder: nn.Module, sounds: list[Sound]) -> np.ndarray:
    with torch.inference_mode():
        return np.concatenate([vocoder(s.mel[None])[0].numpy() for s in sounds])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("teacher", type=Path)
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, default=Path("data/val"))
    parser.add_argument("--clips", type=int, default=60)
    args = parser.parse_args(argv)
    cfg = checkpoint_config(args.checkpoints[0])
    sounds = load_sounds(args.data, cfg, args.clips)
    truth = np.concatenate([s.audio.numpy() for s in sounds])
    mel = log_mel(cfg)
    teacher = load_teacher(args.teacher)
    taught = render(teacher, sounds)
    vocoders = [(f"teacher ({args.teacher})", teacher, cfg)]
    for path in args.checkpoints:
        vocoders.append((str(path), load_stage(path, "vocoder"), checkpoint_config(path)))
    rows = []
    for name, vocoder, vcfg in vocoders:
        audio = taught if vocoder is teacher else render(vocoder, sounds)
        rows.append(
            Row(
                name,
                sum(p.numel() for p in vocoder.parameters()),
                ms_per_second(vocoder, vcfg),
                spectral_distance(audio, truth, mel),
                spectral_distance(audio, taught, mel).log_mel,
            )
        )
    seconds = len(truth) / cfg.sample_rate
    print(describe())
    print(f"quality: {len(sounds)} clips of {args.data} ({seconds:.0f} s), ground-truth mels")
    print(f"speed: ms of compute per second of audio, {torch.get_num_threads()} torch threads")
    print()
    print(
        "| vocoder | parameters | ms per s of audio | speed-up over the teacher "
        "| log-mel distance | vs the teacher's | MR-STFT distance | log-mel distance to the "
        "teacher's audio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    first = rows[0]
    for r in rows:
        print(
            f"| {r.name} | {r.parameters / 1e6:.2f} M | {r.ms_per_second:.1f} | "
            f"{first.ms_per_second / r.ms_per_second:.1f}x | {r.truth.log_mel:.3f} | "
            f"{(r.truth.log_mel / first.truth.log_mel - 1) * 100:+.1f} % | {r.truth.stft:.3f} | "
            f"{r.to_teacher:.3f} |"
        )


if __name__ == "__main__":
    main()
