from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engines.export.onnx_export import export_tier
from engines.models.checkpoint import save_checkpoint
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contract import TierConfig, load_frames_tier
from tests.conftest import TINY_MODEL

SHIPPED = Path(__file__).resolve().parents[2] / "engines" / "artifacts"


@pytest.fixture(scope="session")
def tiny_tier(tmp_path_factory: pytest.TempPathFactory) -> TierConfig:
    """A randomly initialised model, exported like the real one: for contract tests."""
    cfg = TINY_MODEL
    torch.manual_seed(0)
    encoder, generator, vocoder = cfg.build()
    with torch.no_grad():  # onset probabilities around the trigger: events fire here and there
        generator.onset.bias.zero_()
    root = tmp_path_factory.mktemp("models")
    checkpoint = save_checkpoint(root / "tiny.pt", cfg, encoder, generator, vocoder)
    export_tier(checkpoint, root / "tiny")
    return load_frames_tier(root, "tiny")


@pytest.fixture(scope="session")
def tiny_backend(tiny_tier: TierConfig) -> Backend:
    return create_backend("cpu", tiny_tier, threads=1)
