from __future__ import annotations

import pytest

from engines.models.config import ModelConfig
from service.config import Settings

# A model small enough to build, train a few steps and export in seconds: for contract tests.
TINY_MODEL = ModelConfig(
    name="tiny",
    feature_dim=16,
    generator_dim=32,
    vocoder_dim=32,
    vocoder_hidden=64,
    vocoder_blocks=1,
)


@pytest.fixture(scope="session")
def real_engine():
    """The shipped default tier, loaded once for every end-to-end test."""
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings())
    engine.warmup()
    return engine
