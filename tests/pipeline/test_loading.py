"""The engine registry every transport shares: a name resolved and checked once, each tier
loaded once, whatever the threads."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from service.config import SHIPPED_MODELS_DIR, Settings
from service.errors import InvalidInput
from service.pipeline.loading import Engines
from service.pipeline.tier import load_tier


def counting_loader(loads: list[str], delay_s: float = 0.0):
    def load(settings: Settings, tier: str, cache: object) -> SimpleNamespace:
        loads.append(tier)
        time.sleep(delay_s)
        return SimpleNamespace(tier=SimpleNamespace(name=tier), warmup=lambda: None)

    return load


def test_a_tier_is_loaded_once_whatever_the_threads_and_none_is_the_default() -> None:
    loads: list[str] = []
    engines = Engines(Settings(), loader=counting_loader(loads, delay_s=0.05))
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda n=n: got.append(engines(n)))
        for n in ("objects", "objects", None, "motion", "objects")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(loads) == ["motion", "objects"]
    assert engines(None) is engines("motion") and engines.loaded() == {"motion", "objects"}
    assert len({id(e) for e in got}) == 2


@pytest.mark.parametrize("name", ["nope", "../motion", "x" * 65, "mötion"])
def test_an_uninstalled_tier_is_refused_with_the_installed_ones(name: str) -> None:
    loads: list[str] = []
    engines = Engines(Settings(), loader=counting_loader(loads))
    with pytest.raises(InvalidInput) as refused:
        engines(name)
    assert refused.value.code == "unknown_tier"
    for installed in ("motion", "objects", "preview", "export"):
        assert installed in refused.value.reason
    assert loads == []


def test_a_missing_default_fails_its_load_not_the_name_check(tmp_path) -> None:
    settings = Settings(models_dir=tmp_path)
    assert Engines(settings).name(None) == settings.default_tier
    with pytest.raises(Exception, match="FOLEY_MODELS_DIR"):
        Engines(settings)(None)


@pytest.mark.parametrize("name", ["motion", "objects", "preview", "export"])
def test_every_tier_states_its_picture_lookahead_and_rates(name: str) -> None:
    tier = load_tier(SHIPPED_MODELS_DIR, name)
    assert tier.name == name and tier.stages and tier.sample_rate == 48000
    assert tier.width > 0 and tier.height > 0 and tier.lookahead_frames >= 1
    assert (tier.model_fps is None) == (tier.kind != "frames")
