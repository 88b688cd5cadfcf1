"""A tier folder turns back into the checkpoint it was exported from."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from engines.export.onnx_export import export_tier
from engines.export.onnx_import import import_tier
from engines.models.checkpoint import STAGES, save_checkpoint
from tests.conftest import TINY_MODEL


def trained_like(stages):
    """Fresh stages whose weights all differ, as trained ones do: the exporter stores tensors
    of equal value once, and fresh layer scales are all equal."""
    with torch.no_grad():
        for stage in stages:
            for p in stage.parameters():
                p.add_(0.01 * torch.randn_like(p))
    return stages


@pytest.mark.parametrize(
    "cfg", [TINY_MODEL, dataclasses.replace(TINY_MODEL, encoder_keypoints=3)], ids=["", "keypoints"]
)
def test_export_then_import_gives_back_every_weight(tmp_path, cfg):
    torch.manual_seed(0)
    stages = trained_like(cfg.build())
    source = save_checkpoint(tmp_path / "tiny.pt", cfg, *stages)
    export_tier(source, tmp_path / "tier")

    back = torch.load(import_tier(tmp_path / "tier", tmp_path / "back.pt"), weights_only=True)
    original = torch.load(source, weights_only=True)
    assert back["config"] == original["config"]
    for name in STAGES:
        assert back[name].keys() == original[name].keys()
        for key, value in original[name].items():
            assert torch.equal(back[name][key], value), f"{name}.{key}"


def test_a_tier_of_another_shape_is_refused(tmp_path):
    torch.manual_seed(0)
    source = save_checkpoint(tmp_path / "tiny.pt", TINY_MODEL, *trained_like(TINY_MODEL.build()))
    tier = tmp_path / "tier"
    export_tier(source, tier)
    config = json.loads((tier / "config.json").read_text())
    config["model"]["feature_dim"] += 8  # the graphs no longer fit the config
    (tier / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="initializer"):
        import_tier(tier, tmp_path / "back.pt")
