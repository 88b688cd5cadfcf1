"""A contact head with nothing learned: the velocity a moving thing loses where it meets something.

    VelocityLossHead(threshold_px, spread_px).forward(x [B, WINDOW * CHANNELS, h, w]) -> the
    ContactHead's maps (logit, u, strength, material), so it exports and serves like one.

A struck surface stops what hits it within one frame interval: a stick, a hand, a foot or a
ball that arrives at speed leaves the interval slower, stopped or turned back. For each block
of the decided interval k the head follows the incoming motion (interval k - 1) to where it
carries that block, and reads how much of the incoming velocity survives there along the same
direction (the best of the 3 x 3 blocks around the landing point, so a body that carries on
anywhere near is not a contact):

    loss = |v_in| - max(0, best v_out . v_in / |v_in|)      picture px per 1/30 s
    u    = clamp(best v_out . v_in / |v_in|^2, 0, 1)         how far it went before it stopped

Incoming motion counts only where the picture changed (CHANGE_FLOOR): flow invents motion
where there is nothing to follow. Velocity, not appearance: the numbers mean the same in any
scene, which is why this carries to real footage where heads trained on rendered looks did not.

An interval's score is the mean loss of its STRONGEST blocks. It fires only where that is more
than the interval before and the one after lose (one contact, one interval: a swing that eases
round over several intervals never peaks sharply), at one place, the cell that lost the most,
with probability sigmoid((score - threshold_px) / spread_px). Strength is the log of the loss
summed over 5 x 5 blocks (how much moved, how fast); material is not known (uniform).

Gliding (rolling, sliding, anything carried smoothly along): a block that moves through the
interval as it moved into it and moves on out of it (within 30 % of its speed both ways,
above GLIDE_FLOOR) glides. The interval's glide is the mean speed of its fastest gliding blocks
(at least two of them, else none), its slowing the speed those blocks lose per 1/30 s, as a
share of it (a body sliding on friction slows by several per cent, a rolling one hardly at
all), and its heading that of all its gliding blocks' motion summed (what a glide is:
service.pipeline.motion.layer).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from service.pipeline.motion.flow import FACTOR
from service.pipeline.motion.window import BACK, CHANNELS, ERROR_SCALE, VELOCITY_SCALE, WINDOW

STRONGEST = 4  # blocks: an interval's loss is that of the few that lost the most
# Grey change (0-1, block mean) the incoming motion must show in the picture: flow invents
# motion where there is nothing to follow (sky, bare walls, a codec's refresh).
CHANGE_FLOOR = 0.08
NOT_A_PEAK = -30.0  # logit
EPS = 1e-3
GLIDE_FLOOR = 1.0  # px per 1/30 s: slower motion is the flow's own noise
KEPT = 0.7  # the least share of its speed a gliding block carries in and carries on


@dataclass(frozen=True)
class _Seen:
    """One interval of the window as the rule reads it."""

    flow: torch.Tensor  # [B, 2, h, w] px per 1/30 s
    moving: torch.Tensor  # [B, 2, h, w] the flow where the picture changed, zero elsewhere
    length: torch.Tensor  # [B, 1, 1, 1] the interval over 1/30 s (a missing one reads as 1)


def _seen(x: torch.Tensor, j: int) -> _Seen:
    base = j * CHANNELS
    flow = x[:, base : base + 2] / VELOCITY_SCALE
    changed = x[:, base + 4 : base + 5] >= CHANGE_FLOOR * ERROR_SCALE
    length = torch.exp(x[:, base + 6 : base + 7].mean(dim=(2, 3), keepdim=True))
    return _Seen(flow, flow * changed.to(flow.dtype), length)


def _grid(h: int, w: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ys = torch.arange(h, dtype=like.dtype, device=like.device).view(1, h, 1).expand(1, h, w)
    xs = torch.arange(w, dtype=like.dtype, device=like.device).view(1, 1, w).expand(1, h, w)
    return xs, ys


def _along(
    v: torch.Tensor, direction: torch.Tensor, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The most and the least of `v` . `direction` over the 3 x 3 blocks around (x, y) (blocks,
    [B, h, w] each; nearest block, the picture's edge where outside): [B, 1, h, w] twice. An
    index gather: several times faster than ONNX Runtime's grid sampling."""
    b, c, h, w = v.shape
    offsets = [(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    cols = torch.cat([x + dx for dx, _ in offsets], dim=1).round().clamp(0, w - 1)
    rows = torch.cat([y + dy for _, dy in offsets], dim=1).round().clamp(0, h - 1)
    index = (rows * w + cols).to(torch.int64).reshape(b, 1, -1).expand(b, c, -1)
    there = torch.gather(v.reshape(b, c, h * w), 2, index).reshape(b, c, len(offsets), h, w)
    value = (there * direction.unsqueeze(2)).sum(dim=1)
    return value.amax(dim=1, keepdim=True), value.amin(dim=1, keepdim=True)


def velocity_loss(before: _Seen, during: _Seen, after: _Seen) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss [B, 1, h, w] in px per 1/30 s, u [B, 1, h, w]) of a contact inside `during`, for
    each block moving in `before` (see the module docstring)."""
    v_in = before.moving
    _, _, h, w = v_in.shape
    speed = torch.sqrt(v_in[:, 0:1] ** 2 + v_in[:, 1:2] ** 2)
    direction = v_in / (speed + EPS)
    xs, ys = _grid(h, w, v_in)
    # In blocks: where each block is at the end of `before`, and where it would be at the end
    # of `during` had nothing stopped it.
    step_in = v_in * before.length / FACTOR
    step_on = v_in * during.length / FACTOR
    land_x, land_y = xs + step_in[:, 0], ys + step_in[:, 1]
    on_x, on_y = land_x + step_on[:, 0], land_y + step_on[:, 1]
    kept_there, _ = _along(after.flow, direction, on_x, on_y)
    kept_here, turned = _along(after.flow, direction, land_x, land_y)
    kept = torch.clamp(torch.maximum(kept_there, kept_here), min=0.0)
    loss = torch.clamp(speed - kept, min=0.0)
    carried, _ = _along(during.flow, direction, land_x, land_y)
    # More lost than carried into `during`, else the contact is in the interval after it; and
    # seen to the end (a body that leaves the picture is not a contact).
    inside = (on_x >= 0) & (on_x <= w - 1) & (on_y >= 0) & (on_y <= h - 1)
    real = (loss > torch.clamp(carried, min=0.0)) & inside.unsqueeze(1)
    rebound = torch.clamp(-turned, min=0.0)
    u = torch.clamp((carried + rebound) / (speed + rebound + EPS), 0.0, 1.0)
    return loss * real.to(loss.dtype), u


def glide(before: _Seen, during: _Seen, after: _Seen) -> dict[str, torch.Tensor]:
    """speed, slowing and direction (x, y) [B] of the interval `during`'s gliding blocks (the
    module docstring); all zero where too few glide."""
    v = during.moving
    _, _, h, w = v.shape
    speed = torch.sqrt(v[:, 0:1] ** 2 + v[:, 1:2] ** 2)
    direction = v / (speed + EPS)
    xs, ys = _grid(h, w, v)
    back = v * before.length / FACTOR  # where each block was when `before` began
    on = v * during.length / FACTOR  # and where it is when `after` begins
    came, _ = _along(before.flow, direction, xs - back[:, 0], ys - back[:, 1])
    goes, _ = _along(after.flow, direction, xs + on[:, 0], ys + on[:, 1])
    low, high = KEPT * speed, speed / KEPT
    steady = (came >= low) & (came <= high) & (goes >= low) & (goes <= high)
    gliding = steady & (speed >= GLIDE_FLOOR)
    value = (speed * gliding.to(speed.dtype)).flatten(1)
    top, index = torch.topk(value, STRONGEST, dim=1)
    counted = (top > 0).to(top.dtype)
    n = counted.sum(dim=1)
    # per 1/30 s, as a share of the speed: the same numbers at any frame rate
    slowing = ((came - goes) / (2 * speed * during.length + EPS)).flatten(1).gather(1, index)
    enough = (n >= 2).to(top.dtype)
    mean_speed = top.sum(dim=1) / torch.clamp(n, min=1.0) * enough
    mean_slowing = (slowing * counted).sum(dim=1) / torch.clamp(n, min=1.0) * enough
    # The heading of all the gliding blocks' motion together: a rolling body's spin cancels
    # out over its face, leaving the way it goes.
    heading = (v * gliding.to(v.dtype)).sum(dim=(2, 3))
    heading = heading / (torch.sqrt((heading**2).sum(dim=1, keepdim=True)) + EPS)
    return {
        "glide": mean_speed,
        "slowing": mean_slowing,
        "glide_x": heading[:, 0] * enough,
        "glide_y": heading[:, 1] * enough,
    }


class VelocityLossHead(nn.Module):
    def __init__(self, threshold_px: float = 10.0, spread_px: float = 2.0, materials: int = 7):
        super().__init__()
        self.config = {
            "rule": "velocity_loss",
            "threshold_px": threshold_px,
            "spread_px": spread_px,
            "materials": materials,
        }
        self.threshold_px, self.spread_px, self.materials = threshold_px, spread_px, materials

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if x.shape[1] != WINDOW * CHANNELS:
            raise ValueError(f"windows of {x.shape[1]} channels, not {WINDOW * CHANNELS}")
        k = BACK
        seen = [_seen(x, j) for j in range(WINDOW)]
        loss, u = velocity_loss(seen[k - 1], seen[k], seen[k + 1])
        before, _ = velocity_loss(seen[k - 2], seen[k - 1], seen[k])
        score = _strongest(loss)
        logit = (score - self.threshold_px) / self.spread_px
        # One place per interval, the cell that lost the most, where the interval before lost
        # less (it sees the same contact as a smaller loss).
        cell = F.max_pool2d(loss, 2, stride=2, ceil_mode=True)
        place = (cell >= cell.amax(dim=(2, 3), keepdim=True)) & (score >= _strongest(before))
        logit = torch.where(place, logit, torch.full_like(cell, NOT_A_PEAK))
        total = F.avg_pool2d(loss, 5, stride=1, padding=2, count_include_pad=False) * 25
        strength = F.max_pool2d(torch.log1p(total), 2, stride=2, ceil_mode=True)
        # The cell's time: u weighted by the loss of its blocks (where the contact is).
        weight = F.avg_pool2d(loss, 2, stride=2, ceil_mode=True) + EPS
        u_cell = F.avg_pool2d(u * loss, 2, stride=2, ceil_mode=True) / weight
        b, _, h2, w2 = cell.shape
        return {
            "logit": logit,
            "u": u_cell,
            "strength": strength,
            "material": torch.zeros(b, self.materials, h2, w2, dtype=x.dtype, device=x.device),
            **glide(seen[k - 1], seen[k], seen[k + 1]),
        }


def _strongest(loss: torch.Tensor) -> torch.Tensor:
    """[B, 1, 1, 1]: the mean loss of the STRONGEST blocks that lost the most."""
    flat = loss.flatten(1)
    return torch.topk(flat, STRONGEST, dim=1).values.mean(dim=1).view(-1, 1, 1, 1)
