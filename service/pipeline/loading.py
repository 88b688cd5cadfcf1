"""How the transports (CLI, API, export workers, live preview) get an engine: what they need of
one (`Engine`), `load_engine`, which imports the pipeline, and with it ONNX Runtime, only when
called, so `foley --help`, argument errors and the API's import stay light, and `Engines`, the
one registry that names a tier, checks it and keeps its loaded engine."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from service.config import Settings
from service.media.source import VideoInfo
from service.pipeline.tiers import resolve_tier

if TYPE_CHECKING:  # annotations only: importing this module must not load numpy or the model
    from service.cache.base import Cache
    from service.pipeline.backends.base import Backend
    from service.pipeline.tier import Tier
    from service.pipeline.types import ProgressFn, RenderOptions, RenderResult


class Engine(Protocol):
    """What the transports need from `service.pipeline.engine.FoleyEngine`."""

    tier: Tier
    backend: Backend

    def warmup(self) -> None: ...

    def probe(self, input_path: Path) -> VideoInfo:
        """The file's header, checked against the limits (isolated as a render's decode)."""
        ...

    def render(
        self,
        input_path: Path,
        output_path: Path,
        options: RenderOptions,
        progress: ProgressFn | None = None,
    ) -> RenderResult: ...


# (settings, tier name, the store its pipeline caches use or None) -> the engine, not warmed up
EngineLoader = Callable[[Settings, str, "Cache | None"], Engine]


def load_engine(settings: Settings, tier: str, cache: Cache | None = None) -> Engine:
    """The tier `tier` of `settings.models_dir`, loaded (not warmed up). `cache`: where its
    pipeline caches keep their entries (None: its own, from the settings)."""
    from service.pipeline.engine import FoleyEngine

    return FoleyEngine.load(settings, tier, cache)


class Engines:
    """A process's engines by tier name: the one place a requested name is resolved (None: the
    deployment's default tier) and checked against the installed tiers, and where each tier is
    loaded once and warmed up. Shared by the API, its in-process export queue and the preview,
    and by each export worker. Thread-safe; a tier being loaded does not hold up the others."""

    def __init__(
        self,
        settings: Settings,
        *,
        loader: EngineLoader = load_engine,
        cache: Cache | None = None,
        warm: bool = True,
        preloaded: dict[str, Engine] | None = None,
    ) -> None:
        self.settings, self.loader, self.cache, self.warm = settings, loader, cache, warm
        self._engines: dict[str, Engine] = dict(preloaded or {})
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def name(self, tier: str | None) -> str:
        """The tier a request for `tier` gets (service.pipeline.tiers.resolve_tier)."""
        return tier if tier in self._engines else resolve_tier(self.settings, tier)

    def __call__(self, tier: str | None = None) -> Engine:
        """The engine of `tier` (None: the default), loaded and warmed on first use; blocks
        while it loads: call from a worker thread."""
        name = self.name(tier)
        with self._lock:
            if name in self._engines:
                return self._engines[name]
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:
            with self._lock:
                if name in self._engines:
                    return self._engines[name]
            engine = self.loader(self.settings, name, self.cache)
            if self.warm:
                engine.warmup()
            with self._lock:
                self._engines[name] = engine
            return engine

    def loaded(self) -> set[str]:
        with self._lock:
            return set(self._engines)
