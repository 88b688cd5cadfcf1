"""Rebuild a training checkpoint from a tier folder: the inverse of `onnx_export`, so that the
shipped weights can be fine-tuned, pruned or distilled from the repository alone.

    python -m engines.export.onnx_import service/models/preview runs/preview.pt

The tier's config.json holds the ModelConfig; each graph holds its stage's weights as
initializers named after the module's parameters, except the weights of linear layers, which the
exporter stores transposed under a generated name. Those are matched by their transposed shape.
The exporter also stores tensors of equal value once (trained weights never are; the layer
scales of an untrained model are), so a stage whose weights do not all match one to one is
refused rather than guessed.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from engines.models.checkpoint import STAGES, save_checkpoint
from engines.models.config import ModelConfig

log = logging.getLogger(__name__)
PREFIX = "stage."  # onnx_export wraps each stage as `_Streaming.stage`


def tier_config(tier: Path) -> ModelConfig:
    """The ModelConfig in the tier's config.json (`model`); retired study options, if written
    there at 0, are dropped (ModelConfig.from_dict)."""
    return ModelConfig.from_dict(json.loads((tier / "config.json").read_text())["model"])


def stage_weights(graph: Path, expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict `expected` (names and shapes) filled from the initializers of `graph`."""
    arrays = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(graph)).graph.initializer}
    unnamed = {k: v for k, v in arrays.items() if not k.startswith(PREFIX)}
    out: dict[str, torch.Tensor] = {}
    for name, like in expected.items():
        array = arrays.get(PREFIX + name)
        if array is None and like.ndim == 2:
            candidates = [k for k, v in unnamed.items() if v.shape == like.shape[::-1]]
            if len(candidates) != 1:
                raise ValueError(
                    f"{graph.name}: {name} {tuple(like.shape)} matches {len(candidates)} "
                    "unnamed initializers, not one"
                )
            array = unnamed.pop(candidates[0]).T
        if array is None or array.shape != tuple(like.shape):
            raise ValueError(f"{graph.name}: no initializer for {name} {tuple(like.shape)}")
        out[name] = torch.from_numpy(np.array(array)).to(like.dtype)
    return out


def import_tier(tier: Path, checkpoint: Path) -> Path:
    """Write the checkpoint of the tier in `tier` to `checkpoint`."""
    cfg = tier_config(tier)
    stages = cfg.build()
    for name, module in zip(STAGES, stages, strict=True):
        module.load_state_dict(stage_weights(tier / f"{name}.onnx", module.state_dict()))
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(checkpoint, cfg, *stages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("tier", type=Path)
    parser.add_argument("checkpoint", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    log.info("wrote %s", import_tier(args.tier, args.checkpoint))


if __name__ == "__main__":
    main()
