"""Cross-modal generator: visual features at video rate -> log-mel frames at acoustic rate.

Contract:  features [B, T, D] float32
           -> mel   [B, T * R, n_mels] float32 (natural log of mel power, floor log_floor)
              onset [B, T * R] float32 in [0, 1] (probability that a contact sound starts in
                    that acoustic frame; drives event messages and eases training)
R = mels_per_frame. Output frame t*R + r depends on features [t - left_context, t + 1]: one video
frame of lookahead, because a bounce is only visible once the object has moved away again.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from engines.models.layers import CausalConv1d, ConvNeXtBlock


class Generator(nn.Module):
    def __init__(
        self,
        *,
        feature_dim: int,
        n_mels: int,
        mels_per_frame: int,
        dim: int = 128,
        dilations: tuple[int, ...] = (1, 2, 4, 8),
        mel_dim: int = 96,
        mel_blocks: int = 2,
        log_floor: float = 1e-5,
    ) -> None:
        super().__init__()
        self.inp = CausalConv1d(feature_dim, dim, 3, lookahead=1)
        self.blocks = nn.ModuleList(
            ConvNeXtBlock(dim, dim * 3, kernel=3, dilation=d) for d in dilations
        )
        self.up = nn.Linear(dim, mel_dim * mels_per_frame)
        self.mel_blocks = nn.ModuleList(
            ConvNeXtBlock(mel_dim, mel_dim * 3, kernel=5) for _ in range(mel_blocks)
        )
        self.mel = nn.Conv1d(mel_dim, n_mels, 1)
        self.onset = nn.Conv1d(mel_dim, 1, 1)
        self.r = mels_per_frame
        self.mel_dim = mel_dim
        nn.init.constant_(self.mel.bias, float(torch.log(torch.tensor(log_floor))))

    @property
    def left_context(self) -> int:
        """In video frames."""
        video = self.inp.left_context + sum(b.left_context for b in self.blocks)
        acoustic = sum(b.left_context for b in self.mel_blocks)
        return video + -(-acoustic // self.r)

    @property
    def right_context(self) -> int:
        return self.inp.right_context

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, _ = features.shape
        x = self.inp(features.transpose(1, 2))
        for block in self.blocks:
            x = block(x)
        x = F.gelu(self.up(x.transpose(1, 2))).reshape(b, t * self.r, self.mel_dim)
        x = x.transpose(1, 2)
        for block in self.mel_blocks:
            x = block(x)
        mel = self.mel(x).transpose(1, 2)
        onset = torch.sigmoid(self.onset(x)).squeeze(1)
        return mel, onset
