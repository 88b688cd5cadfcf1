"""Keypoint targets: where each object is in the picture the encoder sees.

A contact is a change of an object's velocity. Exact object positions, fed to a generator trunk
trained on the onset loss alone, find contacts far better than the encoder's features do
(docs/experiments.md). The encoder's keypoints (VisualEncoder, `keypoints`) are soft arg-maxes
over its patch grid; these targets put them on the objects, so the features carry each object's
position as numbers.

Which keypoint follows which object is free: per crop, the assignment of keypoints to objects
that costs least over the whole crop is the one trained (at most three objects, so every
assignment is tried), and a keypoint keeps its object for the crop. A frame where an object is
out of the picture asks nothing of its keypoint there.
"""

from __future__ import annotations

import itertools

import torch
from torch.nn import functional as F

# Model pixels per unit of the picture's [-1, 1] coordinates, for the loss: an error of one
# model pixel costs about the same whatever the picture's size.
PIXELS = 48.0


def picture_positions(
    screen: torch.Tensor, flip: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor
) -> torch.Tensor:
    """screen [B, T, O, 2] (normalised device coordinates: y up, NaN where unknown) of the
    crops' frames -> [B, T, O, 2] positions in the picture the encoder sees (x from the left edge,
    y from the top, both in [-1, 1] inside it): mirrored where `flip` [B], then seen through the
    augmentation's camera (`augment`: magnification `scale` [B, 2], shift `shift` [B, 2])."""
    x = torch.where(flip[:, None, None], -screen[..., 0], screen[..., 0])
    y = -screen[..., 1]
    xy = torch.stack([x, y], dim=-1)
    return (xy - shift[:, None, None]) * scale[:, None, None]


def keypoint_loss(
    keypoints: torch.Tensor, maps: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """keypoints [B, T, K, 3] (x, y, spread) and the log-probabilities of their maps [B, T, K,
    rows, columns] (VisualEncoder), positions [B, T, O, 2] (`picture_positions`; NaN or outside
    [-1, 1] = not in the picture) -> per object in the picture and frame, the mean of two costs
    of its keypoint, under the cheapest assignment of keypoints to objects per crop:
    - the smooth L1 distance in model pixels from the keypoint to the object;
    - the cross-entropy of its map against the object's place on the grid (split between the
      four nearest patch centres so that its expectation is the object's position): a map that
      spreads over the picture pulls its keypoint to the middle, where the distance alone
      teaches slowly.
    0 where no object is in the picture. Needs K >= O."""
    b, t, k, rows, cols = maps.shape
    objects = positions.shape[2]
    if objects > k:
        raise ValueError(f"{objects} objects and {k} keypoints: each object needs its own")
    seen = (positions.abs() <= 1.0).all(dim=-1)  # NaN compares False
    if not seen.any():
        return keypoints.new_zeros(())
    target = torch.where(seen[..., None], positions, 0.0)
    error = F.smooth_l1_loss(
        PIXELS * keypoints[:, :, :, None, :2].expand(b, t, k, objects, 2),
        PIXELS * target[:, :, None].expand(b, t, k, objects, 2),
        reduction="none",
    ).sum(dim=-1)
    places = grid_target(target, rows, cols)  # [B, T, O, rows * cols]
    crossed = -torch.einsum("btkg,btog->btko", maps.flatten(3), places)
    # cost[b, i, o]: keypoint i against object o, summed over the frames it is seen in.
    cost = ((error + crossed) * seen[:, :, None].float()).sum(dim=1)
    best = torch.stack(
        [
            cost[:, list(chosen), range(objects)].sum(dim=-1)
            for chosen in itertools.permutations(range(k), objects)
        ]
    ).amin(dim=0)
    return best.sum() / seen.sum()


def grid_target(positions: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """positions [..., 2] in [-1, 1] -> [..., rows * cols]: weights on the four patch centres
    around each position whose mean is the position (at the picture's edge, the nearest)."""
    size = positions.new_tensor([cols, rows])
    u = ((positions + 1) / 2 * size - 0.5).clamp(min=positions.new_zeros(2), max=size - 1)
    low = u.floor().clamp(max=size - 2).clamp(min=0)
    frac = u - low
    out = positions.new_zeros(*positions.shape[:-1], rows * cols)
    for dx in (0, 1):
        for dy in (0, 1):
            wx = frac[..., 0] if dx else 1 - frac[..., 0]
            wy = frac[..., 1] if dy else 1 - frac[..., 1]
            index = (low[..., 1] + dy) * cols + low[..., 0] + dx
            out.scatter_add_(-1, index.long()[..., None], (wx * wy)[..., None])
    return out


def keypoint_error(keypoints: torch.Tensor, positions: torch.Tensor) -> float:
    """The median distance in model pixels between an object in the picture and the nearest
    keypoint, over every frame and object (a report, not a loss)."""
    seen = (positions.abs() <= 1.0).all(dim=-1)
    if not seen.any():
        return float("nan")
    gap = torch.cdist(positions.nan_to_num(), keypoints[..., :2].to(positions.dtype))
    return float(PIXELS * gap.amin(dim=-1)[seen].median())
