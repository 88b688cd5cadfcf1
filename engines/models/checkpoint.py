"""A trained tier on disk: its ModelConfig and the three stages' weights, in one torch file."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from engines.models.config import ModelConfig


def save_checkpoint(
    path: Path, cfg: ModelConfig, encoder: nn.Module, generator: nn.Module, vocoder: nn.Module
) -> Path:
    torch.save(
        {
            "config": cfg.to_dict(),
            "encoder": encoder.state_dict(),
            "generator": generator.state_dict(),
            "vocoder": vocoder.state_dict(),
        },
        path,
    )
    return path


def load_checkpoint(path: Path) -> tuple[ModelConfig, nn.Module, nn.Module, nn.Module]:
    """-> (config, encoder, generator, vocoder), in eval mode."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    cfg = ModelConfig(**state["config"])
    encoder, generator, vocoder = cfg.build()
    for name, module in (("encoder", encoder), ("generator", generator), ("vocoder", vocoder)):
        module.load_state_dict(state[name])
        module.eval()
    return cfg, encoder, generator, vocoder
