"""How the transports (CLI, API, export workers, live preview) get an engine: what they need of
one (`Engine`), and `load_engine`, which imports the pipeline, and with it ONNX Runtime, only
when called, so `foley --help`, argument errors and the API's import stay light."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from service.config import Settings
from service.media.source import VideoInfo

if TYPE_CHECKING:  # annotations only: importing this module must not load numpy or the model
    from service.cache.base import Cache
    from service.pipeline.backends.base import Backend
    from service.pipeline.contract import TierConfig
    from service.pipeline.types import ProgressFn, RenderOptions, RenderResult


class Engine(Protocol):
    """What the transports need from `service.pipeline.engine.FoleyEngine`."""

    tier: TierConfig
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


EngineLoader = Callable[[Settings], Engine]


def load_engine(settings: Settings, cache: Cache | None = None) -> Engine:
    """The settings' default tier, loaded (not warmed up). `cache`: where its pipeline caches
    keep their entries (None: its own, from the settings)."""
    from service.pipeline.engine import FoleyEngine

    return FoleyEngine.load(settings, cache)
