"""Visual encoder: per-frame appearance and motion -> feature vector.

Contract:  frames [B, T, 3, H, W] float32 in [0, 1], age [B, T] float32
           -> features [B, T, D] float32
Feature t sees frames t-1 and t (left_context = 1, right_context = 0); at the first frame of the
input the previous frame is the frame itself (no motion). `step` streams it: its state is the
previous frame's embedding. `age` is how long before model time t
the source frame was captured, in model frames: it tells the generator when a duplicated or early
frame stands for the present, which sub-frame timing needs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

# Scales the glimpses' attention logits: at 1 the attention of a fresh 1x1 convolution is nearly
# uniform, so the glimpses start as the picture's mean and, on the material targets, stayed
# there; at 10 they pick out the moving patches from the start (docs/model-card.md).
GLIMPSE_SHARPNESS = 10.0


class VisualEncoder(nn.Module):
    left_context = 1
    right_context = 0

    def __init__(
        self,
        *,
        height: int = 96,
        width: int = 96,
        dim: int = 96,
        stem: int = 4,
        channels: tuple[int, ...] = (24, 32, 48, 64),
        glimpses: int = 0,
        materials: int = 0,
    ) -> None:
        """A `stem` x `stem` patch embedding (stride `stem`) of each frame, then, on the
        embeddings of the frame and of its difference to the previous frame, a stride-2 3x3
        convolution per further entry of `channels`. The embedding is linear, so the difference
        of two frames' embeddings is the embedding of their difference: each frame is embedded
        once, and a larger input costs little (small objects need the pixels, not a deep stack
        at full resolution).

        `glimpses`: attention maps over the patch grid, each pooling the patches' embeddings
        (frame and difference) where it points, at the embedding's full resolution: what a small
        moving object looks like (its colour, so its material) survives, where the strided
        convolutions blur it into its surroundings. Added to the features through a projection
        that starts at zero, so a checkpoint without them computes the same until they learn.

        `materials`: the glimpses also name the materials that meet in the frame (the object's
        and the other's, out of `materials`), read linearly from what they see and trained on
        their own target (`encode`), so the material is in the picture's features before the
        generator has to learn to hear it. Their probabilities join the features through a
        projection that starts at zero."""
        super().__init__()
        self.stem = nn.Conv2d(3, channels[0], stem, stride=stem)
        layers: list[nn.Module] = []
        c_in = 2 * channels[0]
        for c_out in channels[1:]:
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GELU()]
            c_in = c_out
        self.cnn = nn.Sequential(*layers)
        scale = stem * 2 ** (len(channels) - 1)
        self.proj = nn.Linear(c_in * (height // scale) * (width // scale), dim)
        self.out = nn.Linear(dim + 1, dim)
        self.dim, self.height, self.width = dim, height, width
        self.glimpses = glimpses
        if glimpses:
            self.attend = nn.Conv2d(2 * channels[0], glimpses, 1)
            self.glimpse = nn.Linear(glimpses * 2 * channels[0], dim)
            nn.init.zeros_(self.glimpse.weight)
            nn.init.zeros_(self.glimpse.bias)
        self.materials = materials
        if materials:
            if not glimpses:
                raise ValueError("materials are read from the glimpses: glimpses must be > 0")
            self.material = nn.Linear(glimpses * 2 * channels[0], 2 * materials)
            self.material_in = nn.Linear(2 * materials, dim)
            nn.init.zeros_(self.material_in.weight)
            nn.init.zeros_(self.material_in.bias)

    def forward(self, frames: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        return self.encode(frames, age)[0]

    def encode(
        self, frames: torch.Tensor, age: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`forward`, and the material logits [B, T, 2, materials] of each frame (the object's
        and the other's) where the encoder reads them, else None."""
        e = self.embed(frames)
        return self._features(e, e[:, :1], age)

    def initial_state(self, batch: int = 1) -> dict[str, torch.Tensor]:
        """`before`: the embedding of the frame before the next call's first; `started`: 0
        until the first call, whose first frame then stands in for its own predecessor (as in
        `forward`)."""
        scale = self.stem.stride[0]
        h, w = self.height // scale, self.width // scale
        zeros = self.stem.weight.new_zeros
        return {"before": zeros(batch, self.stem.out_channels, h, w), "started": zeros(batch, 1)}

    def step(
        self, frames: torch.Tensor, age: torch.Tensor, state: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Streaming `forward`: consecutive calls give the features one call over all their
        frames gives. Returns (features, next state)."""
        e = self.embed(frames)
        on = state["started"][:, :, None, None]
        first = on * state["before"] + (1.0 - on) * e[:, 0]
        features = self._features(e, first[:, None], age)[0]
        return features, {"before": e[:, -1], "started": torch.ones_like(state["started"])}

    def embed(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [B, T, 3, H, W] -> patch embeddings [B, T, C, H / stem, W / stem]."""
        b, t, c, h, w = frames.shape
        e = self.stem(frames.reshape(b * t, c, h, w))
        return e.reshape(b, t, *e.shape[1:])

    def _features(
        self, e: torch.Tensor, before: torch.Tensor, age: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Embeddings [B, T, ...] and that of the frame before the first [B, 1, ...] ->
        (features, material logits or None)."""
        b, t = e.shape[:2]
        prev = torch.cat([before, e[:, :-1]], dim=1)
        x = F.gelu(torch.cat([e, (e - prev) * 4.0], dim=2)).flatten(0, 1)
        pooled = self.proj(self.cnn(x).reshape(b, t, -1))
        materials = None
        if self.glimpses:
            # Attention [B*T, G, HW] over the patch grid, and what each glimpse sees [B*T, G, C].
            where = torch.softmax(GLIMPSE_SHARPNESS * self.attend(x).flatten(2), dim=-1)
            seen = (where @ x.flatten(2).transpose(1, 2)).reshape(b, t, -1)
            pooled = pooled + self.glimpse(seen)
            if self.materials:
                materials = self.material(seen).reshape(b, t, 2, self.materials)
                named = torch.softmax(materials, dim=-1).flatten(2)
                pooled = pooled + self.material_in(named)
        x = F.gelu(pooled)
        return self.out(torch.cat([x, age.unsqueeze(-1)], dim=-1)), materials
