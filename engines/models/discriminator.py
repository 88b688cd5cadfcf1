"""Multi-resolution spectrogram discriminator (UnivNet's MRD, as Vocos uses it): the adversary of
vocoder training. Each sub-discriminator is a small 2-D conv net over one STFT resolution's
magnitude; together they judge the fine structure of a waveform that spectral losses average out.

Contract:  audio [B, S] float32  ->  per resolution: (logits [B, 1, T', F'], feature maps)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import weight_norm

RESOLUTIONS = ((2048, 512), (1024, 256), (512, 128))  # (n_fft, hop) at 48 kHz


class SpectrogramDiscriminator(nn.Module):
    def __init__(self, n_fft: int, hop: int, channels: int = 16) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        self.convs = nn.ModuleList(
            [
                weight_norm(nn.Conv2d(1, channels, (3, 9), (1, 2), padding=(1, 4))),
                *(
                    weight_norm(nn.Conv2d(channels, channels, (3, 9), (1, 2), padding=(1, 4)))
                    for _ in range(3)
                ),
                weight_norm(nn.Conv2d(channels, channels, 3, padding=1)),
            ]
        )
        self.out = weight_norm(nn.Conv2d(channels, 1, 3, padding=1))

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        spec = torch.stft(
            audio, self.n_fft, self.hop, window=self.window, return_complex=True
        ).abs()
        x = spec.transpose(1, 2)[:, None]  # (B, 1, frames, bins)
        features = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            features.append(x)
        return self.out(x), features


class MultiResolutionDiscriminator(nn.Module):
    def __init__(self, resolutions: tuple[tuple[int, int], ...] = RESOLUTIONS) -> None:
        super().__init__()
        self.subs = nn.ModuleList(SpectrogramDiscriminator(n, h) for n, h in resolutions)

    def forward(self, audio: torch.Tensor) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
        return [sub(audio) for sub in self.subs]


def discriminator_loss(
    real: list[tuple[torch.Tensor, list[torch.Tensor]]],
    fake: list[tuple[torch.Tensor, list[torch.Tensor]]],
) -> torch.Tensor:
    """Least-squares GAN (HiFi-GAN): real judged 1, generated judged 0."""
    return sum(
        torch.mean((1 - r) ** 2) + torch.mean(f**2)
        for (r, _), (f, _) in zip(real, fake, strict=True)
    ) / len(real)


def generator_losses(
    real: list[tuple[torch.Tensor, list[torch.Tensor]]],
    fake: list[tuple[torch.Tensor, list[torch.Tensor]]],
) -> tuple[torch.Tensor, torch.Tensor]:
    """(adversarial, feature matching): generated judged 1, and the L1 distance of every
    feature map to the real one's (detached)."""
    adversarial = sum(torch.mean((1 - f) ** 2) for f, _ in fake) / len(fake)
    matching = sum(
        F.l1_loss(ff, rf.detach())
        for (_, rfs), (_, ffs) in zip(real, fake, strict=True)
        for rf, ff in zip(rfs, ffs, strict=True)
    ) / len(fake)
    return adversarial, matching
