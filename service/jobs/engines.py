"""The engines a job process renders with: one per tier, loaded and warmed on first use."""

from __future__ import annotations

import threading

from service.cache.base import Cache
from service.config import Settings
from service.pipeline.tiers import check_tier


class EngineRegistry:
    """tier name -> FoleyEngine, each loaded once (thread-safe). `preloaded` engines (the API's
    default tier) are used as they are."""

    def __init__(
        self,
        settings: Settings,
        preloaded: dict[str, object] | None = None,
        *,
        cache: Cache | None = None,
    ) -> None:
        """`cache`: the store the engines keep their pipeline caches in (default: their own,
        from the settings)."""
        self.settings, self.cache = settings, cache
        self._engines: dict[str, object] = dict(preloaded or {})
        self._lock = threading.Lock()

    def __call__(self, tier: str) -> object:
        with self._lock:
            engine = self._engines.get(tier)
            if engine is None:
                check_tier(self.settings, tier)
                # Imported here: the API imports this module without loading ONNX Runtime.
                from service.pipeline.engine import FoleyEngine

                settings = self.settings.model_copy(update={"default_tier": tier})
                engine = FoleyEngine.load(settings, self.cache)
                engine.warmup()
                self._engines[tier] = engine
            return engine
