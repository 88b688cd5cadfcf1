"""Scenes with nothing in them that sounds, made procedurally: negatives for the sound heads.

The simulator's pictures are floors with a few objects on them. On pictures unlike those (real
footage: towers, faces, text, trees) a model trained on them alone can hear the picture instead of
a motion: a still frame of lit towers gave a continuous sound as loud as a rolling ball
(`python -m engines.eval.footage`). These crops show random textures, tilings and shapes, held
still, panned, zoomed or shaken by the camera, with or without sensor noise; their targets are
silence and no contact. Nothing in them makes a contact, so a sound for them is always wrong,
whatever they look like.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

MAX_PAN_PX = 3.0  # per frame, in model pixels
MAX_ZOOM_RATE = 0.01  # per frame
MAX_NOISE = 3.0 / 255  # sensor noise, standard deviation


def distractor_clip(frames: int, height: int, width: int, gen: torch.Generator) -> torch.Tensor:
    """One crop: uint8 [frames, height, width, 3], the layout of a TrainClip's rgb."""
    canvas = texture(2 * height, 2 * width, gen)
    theta = camera_path(frames, height, width, gen)
    grid = F.affine_grid(theta, [frames, 3, height, width], align_corners=False)
    out = F.grid_sample(
        canvas.expand(frames, -1, -1, -1), grid, padding_mode="reflection", align_corners=False
    )
    if _rand(gen) < 0.5:
        out = out + _rand(gen) * MAX_NOISE * torch.randn(out.shape, generator=gen)
    return (out.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1)


def texture(height: int, width: int, gen: torch.Generator) -> torch.Tensor:
    """[1, 3, height, width] in [0, 1]: smooth colour noise over several scales, maybe a tiling
    (windows, tiles, bricks) and a few blobs."""
    image = torch.zeros(1, 3, height, width)
    for cells in (3, 6, 12, 24, 48):
        grid = torch.rand(1, 3, cells, cells, generator=gen)
        up = F.interpolate(grid, size=(height, width), mode="bilinear", align_corners=False)
        image = image + _rand(gen) * up
    image = image - image.amin(dim=(2, 3), keepdim=True)
    image = image / image.amax(dim=(2, 3), keepdim=True).clamp(min=1e-6)
    mix = torch.rand(3, 3, generator=gen) * 2 - 0.5
    image = torch.einsum("ij,bjhw->bihw", mix / mix.abs().sum(1, keepdim=True), image)
    image = image * (0.2 + 0.8 * _rand(gen)) + _rand(gen) * 0.6
    y, x = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    if _rand(gen) < 0.5:
        period = 4 + 12 * torch.rand(2, generator=gen)
        duty = 0.3 + 0.5 * torch.rand(2, generator=gen)
        on = ((y % period[0]) < duty[0] * period[0]) & ((x % period[1]) < duty[1] * period[1])
        image = torch.where(on, torch.rand(1, 3, 1, 1, generator=gen), image)
    for _ in range(int(torch.randint(0, 7, (1,), generator=gen))):
        cy, cx = _rand(gen) * height, _rand(gen) * width
        ry, rx = 2 + 28 * _rand(gen), 2 + 28 * _rand(gen)
        inside = ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
        image = torch.where(inside, torch.rand(1, 3, 1, 1, generator=gen), image)
    return image.clamp(0, 1)


def camera_path(frames: int, height: int, width: int, gen: torch.Generator) -> torch.Tensor:
    """[frames, 2, 3] affine views of a canvas twice the frame's size: held still, panned at up to
    MAX_PAN_PX per frame, zoomed at up to MAX_ZOOM_RATE per frame, or shaken by a pixel or two."""
    t = torch.arange(frames, dtype=torch.float32)
    half = 0.5 * torch.ones(frames)  # the view spans half the canvas
    centre = (torch.rand(2, generator=gen) - 0.5) * 0.6
    path = centre[None].expand(frames, 2).clone()
    kind = _rand(gen)
    if kind < 0.35:  # still
        pass
    elif kind < 0.7:  # pan: pixels of the frame -> canvas coordinates
        angle = 2 * math.pi * _rand(gen)
        speed = MAX_PAN_PX * _rand(gen)
        step = torch.tensor([math.cos(angle) * 2 * 0.5 / width, math.sin(angle) * 2 * 0.5 / height])
        path = path + (t - frames / 2)[:, None] * speed * step[None]
    elif kind < 0.85:  # zoom
        rate = MAX_ZOOM_RATE * (2 * _rand(gen) - 1)
        half = half * torch.exp(rate * (t - frames / 2))
    else:  # shake: a smoothed random walk of a pixel or two
        walk = torch.randn(frames, 2, generator=gen).cumsum(0)
        walk = walk - walk.mean(0)
        scale = 2.0 / walk.abs().amax().clamp(min=1e-6) * _rand(gen)
        path = path + walk * scale * torch.tensor([1 / width, 1 / height])
    theta = torch.zeros(frames, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = half
    theta[:, :, 2] = path
    return theta


def _rand(gen: torch.Generator) -> float:
    return float(torch.rand(1, generator=gen))
