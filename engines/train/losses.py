"""Training losses: multi-resolution STFT (HiFi-GAN / Parallel WaveGAN) for the vocoder; the onset
heads' and the impact events' level losses for the generator."""

from __future__ import annotations

import torch
from torch.nn import functional as F

STFT_RESOLUTIONS = ((2048, 512), (1024, 256), (512, 128), (256, 64))


def _magnitude(x: torch.Tensor, n_fft: int, hop: int) -> torch.Tensor:
    window = torch.hann_window(n_fft, device=x.device)
    spec = torch.stft(x, n_fft, hop, window=window, return_complex=True)
    # Clamped before the root: abs() has no gradient at an exact zero (silence).
    return (spec.real**2 + spec.imag**2).clamp(min=1e-14).sqrt()


def multi_resolution_stft_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Spectral convergence + log-magnitude L1, averaged over resolutions. (B, S) inputs."""
    total = pred.new_zeros(())
    for n_fft, hop in STFT_RESOLUTIONS:
        p, t = _magnitude(pred, n_fft, hop), _magnitude(target, n_fft, hop)
        convergence = torch.linalg.norm(t - p) / torch.linalg.norm(t).clamp(min=1e-7)
        total = total + convergence + F.l1_loss(p.log(), t.log())
    return total / len(STFT_RESOLUTIONS)


def onset_losses(
    onset_logit: torch.Tensor, offset_logit: torch.Tensor, onset: torch.Tensor, r: int
) -> torch.Tensor:
    """BCE of the video-rate onset head against "a contact starts in this video frame", plus
    cross-entropy of the offset head against the acoustic frame it starts on (on those frames)."""
    b, t = onset_logit.shape
    per_frame = onset.reshape(b, t, r)
    target = per_frame.amax(dim=-1)
    loss = F.binary_cross_entropy_with_logits(onset_logit, target, pos_weight=torch.tensor(2.0))
    hit = target > 0
    if hit.any():
        where = per_frame.argmax(dim=-1)
        logits = offset_logit.transpose(1, 2)[hit]
        loss = loss + F.cross_entropy(logits, where[hit])
    return loss


def level_loss(event_level: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """L1 of the level the generator's events would emit [B, n_mels, M] (Generator.event_level,
    log power) against the impacts' own levels [B, M, n_mels] (TrainClip.impact_level), in the
    acoustic frames where an impact starts (the rest are NaN); 0 where none does."""
    hit = ~torch.isnan(levels[..., 0])
    if not hit.any():
        return event_level.new_zeros(())
    predicted = event_level.clamp(max=8.0).transpose(1, 2)
    return F.l1_loss(predicted[hit], levels[hit])
