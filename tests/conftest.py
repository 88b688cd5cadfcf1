from __future__ import annotations

import pytest

from service.config import Settings


@pytest.fixture(scope="session")
def real_engine():
    """The shipped default tier, loaded once for every end-to-end test."""
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings())
    engine.warmup()
    return engine
