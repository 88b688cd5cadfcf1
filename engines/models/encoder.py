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

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

# Scales the glimpses' attention logits: at 1 the attention of a fresh 1x1 convolution is nearly
# uniform, so the glimpses start as the picture's mean and, on the material targets, stayed
# there; at 10 they pick out the moving patches from the start (docs/experiments.md).
GLIMPSE_SHARPNESS = 10.0
# Hidden width of the keypoints' locator (VisualEncoder, `keypoints`).
LOCATOR_CHANNELS = 32


class Encoded(NamedTuple):
    """What `VisualEncoder.encode` gives per frame: the features [B, T, D]; the material logits
    [B, T, 2, materials] (the object's and the other's) where the encoder names them, else None;
    the keypoints [B, T, K, 3] (x, y in [-1, 1] from the picture's left and top edges, and the
    spread of the attention behind them) and the log-probabilities of their maps over the patch
    grid [B, T, K, rows, columns] where it has them, else None."""

    features: torch.Tensor
    materials: torch.Tensor | None
    keypoints: torch.Tensor | None
    keypoint_maps: torch.Tensor | None


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
        keypoints: int = 0,
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
        projection that starts at zero.

        `keypoints`: each a spatial softmax over the patch grid, read out as the expected
        position of what it points at and the spread around it (a soft arg-max: a position
        finer than a patch). Trained to sit on the objects (engines.train.keypoints), they give
        the generator where each object is as numbers, so a change of its velocity (a bounce) is
        a linear function of three frames' features, which the generator's first convolution
        reads. They join the features after the last nonlinearity, in patches (a model pixel is
        a quarter of one with the 4x4 stem, so a bounce of a pixel is a change the projection
        needs no large weights to pass on), through a projection that starts at zero."""
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
        self.keypoints = keypoints
        if keypoints:
            self.locate = nn.Sequential(
                nn.Conv2d(2 * channels[0], LOCATOR_CHANNELS, 3, padding=1),
                nn.GELU(),
                nn.Conv2d(LOCATOR_CHANNELS, keypoints, 1),
            )
            self.keypoint_in = nn.Linear(3 * keypoints, dim)
            nn.init.zeros_(self.keypoint_in.weight)
            nn.init.zeros_(self.keypoint_in.bias)
            rows, cols = height // stem, width // stem
            y = (torch.arange(rows) + 0.5) / rows * 2 - 1
            x = (torch.arange(cols) + 0.5) / cols * 2 - 1
            grid = torch.stack(torch.meshgrid(x, y, indexing="xy"), dim=-1).reshape(-1, 2)
            self.register_buffer("grid", grid, persistent=False)  # (rows * cols, 2): x, y
            half = torch.tensor([cols / 2, rows / 2, cols * rows / 4])
            self.register_buffer("patches", half, persistent=False)  # x, y, spread -> patches

    def forward(self, frames: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        return self.encode(frames, age).features

    def encode(self, frames: torch.Tensor, age: torch.Tensor) -> Encoded:
        """`forward`, with what the encoder reads on the way (`Encoded`)."""
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
        features = self._features(e, first[:, None], age).features
        return features, {"before": e[:, -1], "started": torch.ones_like(state["started"])}

    def embed(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [B, T, 3, H, W] -> patch embeddings [B, T, C, H / stem, W / stem]."""
        b, t, c, h, w = frames.shape
        e = self.stem(frames.reshape(b * t, c, h, w))
        return e.reshape(b, t, *e.shape[1:])

    def _features(self, e: torch.Tensor, before: torch.Tensor, age: torch.Tensor) -> Encoded:
        """Embeddings [B, T, ...] and that of the frame before the first [B, 1, ...] ->
        `Encoded`."""
        b, t = e.shape[:2]
        x = self._motion(e, before)
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
        features = self.out(torch.cat([F.gelu(pooled), age.unsqueeze(-1)], dim=-1))
        keypoints = maps = None
        if self.keypoints:
            keypoints, maps = self._locate(x, b, t)
            features = features + self.keypoint_in((keypoints * self.patches).flatten(2))
        return Encoded(features, materials, keypoints, maps)

    def locate_keypoints(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keypoints of `frames` [B, T, 3, H, W] and their maps, as `encode` gives them, without
        the features: what the locator alone is trained on (engines.train.locator)."""
        e = self.embed(frames)
        return self._locate(self._motion(e, e[:, :1]), *e.shape[:2])

    def _motion(self, e: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        """Embeddings [B, T, C, h, w] and that of the frame before the first -> each frame's
        embedding beside its difference to the previous one [B*T, 2C, h, w]."""
        prev = torch.cat([before, e[:, :-1]], dim=1)
        return F.gelu(torch.cat([e, (e - prev) * 4.0], dim=2)).flatten(0, 1)

    def _locate(self, x: torch.Tensor, b: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`_motion`'s output -> keypoints [B, T, K, 3], maps [B, T, K, h, w] (`Encoded`)."""
        # The locator reads the embeddings without training them: its targets would otherwise
        # pull at the features the generator was trained on.
        logits = self.locate(x.detach())  # [B*T, K, h, w]
        where = torch.softmax(logits.flatten(2), dim=-1)
        xy = where @ self.grid  # [B*T, K, 2]
        spread = (where * (self.grid[None, None] - xy[:, :, None]).square().sum(-1)).sum(-1)
        keypoints = torch.cat([xy, spread.unsqueeze(-1)], dim=-1).reshape(b, t, -1, 3)
        maps = torch.log_softmax(logits.flatten(2), dim=-1).reshape(b, t, *logits.shape[1:])
        return keypoints, maps
