"""Training losses: multi-resolution STFT (HiFi-GAN / Parallel WaveGAN) and log-mel L1."""

from __future__ import annotations

import torch
from torch.nn import functional as F

STFT_RESOLUTIONS = ((2048, 512), (1024, 256), (512, 128), (256, 64))


def _magnitude(x: torch.Tensor, n_fft: int, hop: int) -> torch.Tensor:
    window = torch.hann_window(n_fft, device=x.device)
    spec = torch.stft(x, n_fft, hop, window=window, return_complex=True)
    return spec.abs().clamp(min=1e-7)


def multi_resolution_stft_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Spectral convergence + log-magnitude L1, averaged over resolutions. (B, S) inputs."""
    total = pred.new_zeros(())
    for n_fft, hop in STFT_RESOLUTIONS:
        p, t = _magnitude(pred, n_fft, hop), _magnitude(target, n_fft, hop)
        convergence = torch.linalg.norm(t - p) / torch.linalg.norm(t).clamp(min=1e-7)
        total = total + convergence + F.l1_loss(p.log(), t.log())
    return total / len(STFT_RESOLUTIONS)
