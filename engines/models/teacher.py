"""The teacher vocoder: a large, offline vocoder that the service's compact one is distilled from.

Contract:  mel [B, M, n_mels] float32  ->  audio [B, M * hop] float32, as the service's vocoder
(engines.models.vocoder), but not causal and not streamed: it sees the whole clip. About the size
of HiFi-GAN V1 (14 M parameters against 13.9 M), in the Vocos form: a ConvNeXt backbone with
centred kernels, run at twice the mel frame rate (a learned 2x upsampling), predicting the
spectrum of 800-sample grains every hop / 2 samples that an inverse STFT overlaps by 75 %. The
finer grain hop gives attacks twice the time resolution of the service's vocoder, at about 16x
its compute per second of audio. It is only ever run offline, to make the student's targets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from engines.models.layers import ConvNeXtBlock


@dataclass(frozen=True)
class TeacherConfig:
    n_mels: int = 64
    hop: int = 400  # samples per mel frame, as the model's ModelConfig
    dim: int = 512
    hidden: int = 1536
    blocks: int = 8
    kernel: int = 7
    n_fft: int = 800


class TeacherVocoder(nn.Module):
    def __init__(self, cfg: TeacherConfig) -> None:
        super().__init__()
        if cfg.hop % 2:
            raise ValueError("the teacher's grain hop is half the mel hop: the hop must be even")
        self.cfg = cfg
        self.grain_hop = cfg.hop // 2
        half = (cfg.kernel - 1) // 2
        self.inp = nn.Conv1d(cfg.n_mels, cfg.dim, cfg.kernel, padding=half)
        self.up = nn.ConvTranspose1d(cfg.dim, cfg.dim, 4, stride=2, padding=1)
        self.norm = nn.LayerNorm(cfg.dim)
        self.blocks = nn.ModuleList(
            ConvNeXtBlock(cfg.dim, cfg.hidden, cfg.kernel, lookahead=half)
            for _ in range(cfg.blocks)
        )
        self.out_norm = nn.LayerNorm(cfg.dim)
        self.bins = cfg.n_fft // 2 + 1
        self.head = nn.Linear(cfg.dim, 2 * self.bins)
        self.register_buffer("window", torch.hann_window(cfg.n_fft), persistent=False)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        m = mel.shape[1]
        x = self.up(self.inp(mel.transpose(1, 2)))  # (B, dim, 2M)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.head(self.out_norm(x.transpose(1, 2))).transpose(1, 2)  # (B, 2 * bins, 2M)
        log_mag, phase = x[:, : self.bins], x[:, self.bins :]
        spec = torch.polar(torch.exp(torch.clamp(log_mag, max=6.0)), phase)
        return torch.istft(
            spec,
            self.cfg.n_fft,
            self.grain_hop,
            window=self.window,
            center=True,
            length=m * self.cfg.hop,
        )


def save_teacher(path: Path, teacher: TeacherVocoder) -> Path:
    torch.save({"teacher": asdict(teacher.cfg), "state": teacher.state_dict()}, path)
    return path


def load_teacher(path: Path) -> TeacherVocoder:
    saved = torch.load(path, map_location="cpu", weights_only=True)
    teacher = TeacherVocoder(TeacherConfig(**saved["teacher"]))
    teacher.load_state_dict(saved["state"])
    return teacher.eval()
