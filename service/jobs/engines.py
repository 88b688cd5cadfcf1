"""The engines a job process renders with: one per tier, loaded and warmed on first use."""

from __future__ import annotations

import threading

from service.cache.base import Cache
from service.config import Settings
from service.pipeline.loading import Engine, load_engine
from service.pipeline.tiers import check_tier


class EngineRegistry:
    """tier name -> FoleyEngine, each loaded once (thread-safe). `preloaded` engines (the API's
    default tier) are used as they are."""

    def __init__(
        self,
        settings: Settings,
        preloaded: dict[str, Engine] | None = None,
        *,
        cache: Cache | None = None,
    ) -> None:
        """`cache`: the store the engines keep their pipeline caches in (default: their own,
        from the settings)."""
        self.settings, self.cache = settings, cache
        self._engines: dict[str, Engine] = dict(preloaded or {})
        self._lock = threading.Lock()

    def __call__(self, tier: str) -> Engine:
        with self._lock:
            engine = self._engines.get(tier)
            if engine is None:
                check_tier(self.settings, tier)
                settings = self.settings.model_copy(update={"default_tier": tier})
                engine = load_engine(settings, self.cache)
                engine.warmup()
                self._engines[tier] = engine
            return engine
