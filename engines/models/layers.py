"""Causal building blocks shared by the three model stages.

Causality is what makes streaming exact: a layer's output at step t depends on inputs <= t (plus
an explicit, declared lookahead). Each layer reports its receptive field so the exported config
can state the stage's context without hand-counting, and streams with `step`, carrying its last
inputs as state.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class CausalConv1d(nn.Conv1d):
    """(B, C_in, L) -> (B, C_out, L); output t sees inputs [t - left_context, t + right_context],
    left_context = (kernel - 1) * dilation - lookahead and right_context = lookahead."""

    def __init__(
        self,
        c_in: int,
        c_out: int,
        kernel: int,
        *,
        dilation: int = 1,
        groups: int = 1,
        lookahead: int = 0,
    ) -> None:
        super().__init__(c_in, c_out, kernel, dilation=dilation, groups=groups)
        span = (kernel - 1) * dilation
        if lookahead > span:
            raise ValueError("lookahead larger than the kernel span")
        self.pad_left = span - lookahead
        self.pad_right = lookahead

    @property
    def left_context(self) -> int:
        return self.pad_left

    @property
    def right_context(self) -> int:
        return self.pad_right

    @property
    def span(self) -> int:
        """Inputs of history a streaming step keeps: (kernel - 1) * dilation."""
        return self.pad_left + self.pad_right

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.pad_left, self.pad_right)))

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Streaming: x [B, C_in, L] and the last `span` inputs before it [B, C_in, span] ->
        (L outputs, next state). The outputs lag the inputs by `right_context`: output l is
        the one for input position l - right_context. Zero history is `forward`'s padding."""
        full = torch.cat([state, x], dim=-1)
        return super().forward(full), full[..., full.shape[-1] - self.span :]


class ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over channels of a (B, C, L) tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ConvNeXtBlock(nn.Module):
    """Vocos-style block: depthwise conv -> LN -> pointwise MLP -> layer scale. Causal unless
    given a `lookahead` (at most the kernel's span; half of it centres the kernel)."""

    def __init__(
        self, dim: int, hidden: int, kernel: int = 7, dilation: int = 1, lookahead: int = 0
    ) -> None:
        super().__init__()
        self.dwconv = CausalConv1d(
            dim, dim, kernel, dilation=dilation, groups=dim, lookahead=lookahead
        )
        self.norm = ChannelLayerNorm(dim)
        self.pw1 = nn.Conv1d(dim, hidden, 1)
        self.pw2 = nn.Conv1d(hidden, dim, 1)
        self.scale = nn.Parameter(torch.full((1, dim, 1), 0.1))

    @property
    def left_context(self) -> int:
        return self.dwconv.left_context

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._mix(x, self.dwconv(x))

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Streaming `forward` (see CausalConv1d.step), for a causal block only."""
        if self.dwconv.right_context:
            raise NotImplementedError("a block with lookahead does not stream")
        y, state = self.dwconv.step(x, state)
        return self._mix(x, y), state

    def _mix(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + self.scale * y
