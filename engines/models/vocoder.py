"""Vocoder: log-mel frames -> 48 kHz waveform. HiFi-GAN family with an iSTFT head (Vocos /
iSTFTNet): a causal ConvNeXt backbone at the acoustic frame rate predicts each frame's spectrum,
and a fixed inverse DFT plus overlap-add makes the samples. Working at the frame rate instead of
upsampling to the sample rate is what makes 48 kHz cheap on a CPU.

Contract:  mel [B, M, n_mels] float32  ->  audio [B, M * hop] float32
Frame m emits a Hann-windowed grain of 2 * hop samples at [m * hop, m * hop + 2 * hop); samples
[m * hop, (m + 1) * hop) are the first half of grain m plus the second half of grain m - 1
(periodic Hann at 50 % overlap sums to one). Output depends on mel frames <= m: causal, with
left_context = backbone receptive field + 1.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from engines.models.layers import CausalConv1d, ConvNeXtBlock


def inverse_dft_basis(n_fft: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n_fft//2+1, n_fft) cosine and sine bases of a windowed real inverse DFT."""
    bins = n_fft // 2 + 1
    k = torch.arange(bins, dtype=torch.float64).unsqueeze(1)
    n = torch.arange(n_fft, dtype=torch.float64).unsqueeze(0)
    angle = 2 * math.pi * k * n / n_fft
    weight = torch.full((bins, 1), 2.0, dtype=torch.float64)
    weight[0] = weight[-1] = 1.0
    window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
    cos = weight * torch.cos(angle) * window / n_fft
    sin = weight * torch.sin(angle) * window / n_fft
    return cos.float(), sin.float()


class Vocoder(nn.Module):
    def __init__(
        self,
        *,
        n_mels: int,
        hop: int,
        dim: int = 128,
        hidden: int = 384,
        blocks: int = 4,
        kernel: int = 7,
    ) -> None:
        super().__init__()
        self.hop = hop
        self.n_fft = 2 * hop
        self.bins = hop + 1
        self.inp = CausalConv1d(n_mels, dim, kernel)
        self.norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(ConvNeXtBlock(dim, hidden, kernel) for _ in range(blocks))
        self.out_norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 2 * self.bins)
        cos, sin = inverse_dft_basis(self.n_fft)
        self.register_buffer("cos_basis", cos, persistent=False)
        self.register_buffer("sin_basis", sin, persistent=False)

    @property
    def left_context(self) -> int:
        return self.inp.left_context + sum(b.left_context for b in self.blocks) + 1

    right_context = 0

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return self.step(mel, self.initial_state(mel.shape[0]))[0]

    def initial_state(self, batch: int = 1) -> dict[str, torch.Tensor]:
        """Zeros: the padding before a clip (no mel frames, no grain still sounding)."""
        zeros = self.cos_basis.new_zeros
        state = {"mel": zeros(batch, self.inp.in_channels, self.inp.span)}
        for i, block in enumerate(self.blocks):
            state[f"block{i}"] = zeros(batch, block.dwconv.in_channels, block.dwconv.span)
        state["grain"] = zeros(batch, self.hop)
        return state

    def step(
        self, mel: torch.Tensor, state: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """mel [B, M, n_mels] after `state` -> (audio [B, M * hop], next state): consecutive
        calls give the samples one call over all their frames gives."""
        state = dict(state)
        b, m, _ = mel.shape
        x, state["mel"] = self.inp.step(mel.transpose(1, 2), state["mel"])
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for i, block in enumerate(self.blocks):
            x, state[f"block{i}"] = block.step(x, state[f"block{i}"])
        x = self.head(self.out_norm(x.transpose(1, 2)))  # (B, M, 2 * bins)
        log_mag, phase = x[..., : self.bins], x[..., self.bins :]
        mag = torch.exp(torch.clamp(log_mag, max=6.0))
        grains = (mag * torch.cos(phase)) @ self.cos_basis - (
            mag * torch.sin(phase)
        ) @ self.sin_basis
        first, second = grains[..., : self.hop], grains[..., self.hop :]
        # Samples of frame m: the first half of grain m plus the second half of grain m - 1.
        second = torch.cat([state["grain"][:, None], second], dim=1)
        state["grain"] = second[:, m]
        return (first + second[:, :m]).reshape(b, m * self.hop), state
