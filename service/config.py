"""Deploy-time settings, read once from the environment (prefix FOLEY_) and validated at startup.

Model hyperparameters are not here: they live in each tier's config.json beside its weights.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FOLEY_", extra="ignore")

    models_dir: Path = Field(default=REPO_ROOT / "engines" / "artifacts")
    default_tier: str = "preview"
    backend: str = "onnxruntime"
    # One: the decoder runs in its own process beside inference and takes the other core; two
    # inference threads only contend with it (10 s 720p clip: 0.45 s end to end with 2 threads,
    # 0.39 s with 1, `python -m bench.offline`). 0 = one per core.
    intra_op_threads: int = Field(default=1, ge=0)

    # Input limits: a tiny file can declare a huge frame or a 12-hour duration.
    max_upload_bytes: int = Field(default=2 * 1024**3, gt=0)
    max_duration_s: float = Field(default=3 * 3600.0, gt=0)
    max_pixels: int = Field(default=4096 * 2304, gt=0)
    decode_stall_timeout_s: float = Field(default=30.0, gt=0)

    # A render already spreads over every core (intra-op threads): two at once only share them.
    max_concurrent_renders: int = Field(default=1, ge=1)
    # Renders that may wait for a slot before new requests get 503 busy, so uploads do not pile
    # up on disk behind a long queue.
    max_queued_renders: int = Field(default=8, ge=0)

    # Live preview (WebSocket /v1/preview, service.preview): one worker thread runs every session.
    preview_max_sessions: int = Field(default=16, ge=1)
    # How long the worker waits after a frame for other sessions' frames to batch with it.
    preview_batch_window_ms: float = Field(default=2.0, ge=0)
    preview_queue_frames: int = Field(default=8, ge=1)  # frames waiting per session
    preview_send_queue: int = Field(default=64, ge=1)  # messages waiting for a slow reader
    preview_idle_timeout_s: float = Field(default=30.0, gt=0)
    preview_max_frame_pixels: int = Field(default=1920 * 1080, gt=0)
    # Who may connect: API keys (none = open) and browser origins besides the service's own.
    api_keys: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)

    work_dir: Path | None = None  # temp files for uploads and renders; None = system temp
    host: str = "127.0.0.1"
    port: int = 8000


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
