"""Training batches: random crops of the clips, and the camera augmentation of their frames."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from engines.train.data import TrainClip


def crop_starts(
    clips: list[TrainClip], n: int, frames: int, gen: torch.Generator, prefer_sound: bool
) -> list[tuple[TrainClip, int]]:
    """`n` crops of `frames` video frames: (clip, first frame). With `prefer_sound`, four in
    five are redrawn until their target mel has something above silence."""
    picks = []
    while len(picks) < n:
        clip = clips[int(torch.randint(len(clips), (1,), generator=gen))]
        total = len(clip.age)
        if total <= frames:
            continue
        start = int(torch.randint(total - frames, (1,), generator=gen))
        if prefer_sound and float(torch.rand(1, generator=gen)) < 0.8:
            r = clip.mel.shape[0] // total
            if clip.mel[start * r : (start + frames) * r].max() < -9.0:
                continue
        picks.append((clip, start))
    return picks


def augment(frames: torch.Tensor, p: float, gen: torch.Generator) -> torch.Tensor:
    """frames [B, T, 3, H, W] in [0, 1]: each crop, with probability p, seen through a camera
    that is zoomed (0.8-1.25x), shifted (up to 12 % of the frame), squashed or stretched
    vertically (0.8-1.25x, as a steeper or flatter view foreshortens the floor) and exposed
    differently (gain 0.8-1.2, offset +-0.05). The same for every frame of the crop."""
    b, t, c, h, w = frames.shape

    def uniform(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(b, generator=gen)

    on = torch.rand(b, generator=gen) < p
    zoom = torch.exp(uniform(-0.22, 0.22))
    squash = torch.exp(uniform(-0.22, 0.22))
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0] = 1 / zoom
    theta[:, 1, 1] = 1 / (zoom * squash)
    theta[:, 0, 2] = uniform(-0.12, 0.12)
    theta[:, 1, 2] = uniform(-0.12, 0.12)
    identity = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    theta = torch.where(on[:, None, None], theta, identity)
    grid = F.affine_grid(theta, [b, c, h, w], align_corners=False)
    grid = grid.repeat_interleave(t, dim=0)
    out = F.grid_sample(
        frames.reshape(b * t, c, h, w), grid, padding_mode="border", align_corners=False
    ).reshape(b, t, c, h, w)
    gain = torch.where(on, uniform(0.8, 1.2), 1.0)[:, None, None, None, None]
    bias = torch.where(on, uniform(-0.05, 0.05), 0.0)[:, None, None, None, None]
    return (out * gain + bias).clamp(0.0, 1.0)
