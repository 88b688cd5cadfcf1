"""Log-mel analysis for training targets, aligned with the stage contract: acoustic frame m owns
samples [m*hop, (m+1)*hop) and its analysis window is centred on that span."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float
) -> np.ndarray:
    """(n_mels, n_fft//2+1) Slaney-style triangular filters on the HTK mel scale."""

    def hz_to_mel(f: np.ndarray) -> np.ndarray:
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m: np.ndarray) -> np.ndarray:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    freqs = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(np.array(fmin)), hz_to_mel(np.array(fmax)), n_mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None] - lower) / (centre - lower)
    down = (upper - freqs[None]) / (upper - centre)
    bank = np.maximum(0.0, np.minimum(up, down))
    bank *= 2.0 / (upper - lower)  # equal area per filter
    return bank.astype(np.float32)


class LogMel(nn.Module):
    """audio [B, S] -> log-mel [B, S // hop, n_mels]."""

    def __init__(
        self,
        *,
        sample_rate: int,
        hop: int,
        n_fft: int,
        n_mels: int,
        fmin: float,
        fmax: float,
        log_floor: float,
    ) -> None:
        super().__init__()
        self.hop, self.n_fft, self.log_floor = hop, n_fft, log_floor
        bank = mel_filterbank(sample_rate, n_fft, n_mels, fmin, fmax)
        self.register_buffer("bank", torch.from_numpy(bank), persistent=False)
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        m = audio.shape[-1] // self.hop
        left = (self.n_fft - self.hop) // 2
        right = self.n_fft - self.hop - left
        padded = torch.nn.functional.pad(audio[..., : m * self.hop], (left, right))
        frames = padded.unfold(-1, self.n_fft, self.hop)[..., :m, :]  # (B, M, n_fft)
        spec = torch.fft.rfft(frames * self.window, dim=-1)
        # real^2 + imag^2, not abs()^2: abs has no gradient at an exact zero (silence).
        spec = spec.real**2 + spec.imag**2
        return torch.log(torch.clamp(spec @ self.bank.T, min=self.log_floor))
