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


STAGES = ("encoder", "generator", "vocoder")


def checkpoint_config(path: Path) -> ModelConfig:
    return ModelConfig.from_dict(torch.load(path, map_location="cpu", weights_only=True)["config"])


def load_checkpoint(path: Path) -> tuple[ModelConfig, nn.Module, nn.Module, nn.Module]:
    """-> (config, encoder, generator, vocoder), in eval mode."""
    cfg = checkpoint_config(path)
    encoder, generator, vocoder = (load_stage(path, name) for name in STAGES)
    return cfg, encoder, generator, vocoder


def load_stage(path: Path, name: str) -> nn.Module:
    """One stage of a checkpoint, in eval mode (e.g. to reuse a trained vocoder)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    module = ModelConfig.from_dict(state["config"]).build()[STAGES.index(name)]
    module.load_state_dict(state[name])
    return module.eval()
