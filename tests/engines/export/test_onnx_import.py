"""A tier folder turns back into the checkpoint it was exported from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engines.export.onnx_export import export_tier
from engines.export.onnx_import import import_tier, tier_config
from engines.models.checkpoint import STAGES, checkpoint_config, save_checkpoint
from engines.models.config import RETIRED_FIELDS, ModelConfig
from tests.conftest import tiny_model


def trained_like(stages):
    """Fresh stages whose weights all differ, as trained ones do: the exporter stores tensors
    of equal value once, and fresh layer scales are all equal."""
    with torch.no_grad():
        for stage in stages:
            for p in stage.parameters():
                p.add_(0.01 * torch.randn_like(p))
    return stages


def test_export_then_import_gives_back_every_weight(tmp_path):
    torch.manual_seed(0)
    stages = trained_like(tiny_model().build())
    source = save_checkpoint(tmp_path / "tiny.pt", tiny_model(), *stages)
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
    model = tiny_model()
    source = save_checkpoint(tmp_path / "tiny.pt", model, *trained_like(model.build()))
    tier = tmp_path / "tier"
    export_tier(source, tier)
    config = json.loads((tier / "config.json").read_text())
    config["model"]["feature_dim"] += 8  # the graphs no longer fit the config
    (tier / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="initializer"):
        import_tier(tier, tmp_path / "back.pt")


@pytest.mark.parametrize("tier", ["preview", "export"])
def test_the_shipped_tiers_import(tmp_path, tier):
    """`preview`'s config.json still carries the retired study options, at 0; `export`'s does not.
    Both give back their checkpoint, every weight of the model their config describes."""
    folder = Path(__file__).resolve().parents[3] / "service" / "models" / tier
    model = json.loads((folder / "config.json").read_text())["model"]
    cfg = tier_config(folder)
    assert cfg.to_dict() == {k: v for k, v in model.items() if k not in RETIRED_FIELDS} | {
        "encoder_channels": tuple(model["encoder_channels"])
    }
    assert checkpoint_config(import_tier(folder, tmp_path / "back.pt")) == cfg


def test_retired_options_load_when_off_and_are_refused_when_on(tmp_path):
    """A config written while the study options existed (a tier's config.json, a checkpoint)
    loads if they were off; one with an option on describes a model no longer built."""
    old = tiny_model().to_dict() | {name: 0 for name in RETIRED_FIELDS}
    assert ModelConfig.from_dict(old) == tiny_model()
    torch.save({"config": old}, tmp_path / "old.pt")
    assert checkpoint_config(tmp_path / "old.pt") == tiny_model()
    for name in RETIRED_FIELDS:
        with pytest.raises(ValueError, match=name):
            ModelConfig.from_dict(old | {name: 2})
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict(tiny_model().to_dict() | {"encoder_wings": 2})
