"""The optimiser schedule every training loop here uses: a one-cycle learning rate, and steps
with each parameter group's gradient norm clipped to 1."""

from __future__ import annotations

import torch


def one_cycle(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=optimizer.param_groups[0]["lr"], total_steps=steps, pct_start=0.05
    )


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loss: torch.Tensor,
) -> None:
    optimizer.zero_grad()
    loss.backward()
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_norm_(group["params"], 1.0)
    optimizer.step()
    scheduler.step()
