"""Deploy-time settings, read once from the environment (prefix FOLEY_) and validated at startup.

Model hyperparameters are not here: they live in each tier's config.json beside its weights.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The shipped tiers: package data of `engines`, beside this package in the source tree and in an
# installed wheel alike.
SHIPPED_MODELS_DIR = Path(__file__).resolve().parent / "models"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FOLEY_", extra="ignore")

    models_dir: Path = Field(default=SHIPPED_MODELS_DIR)
    default_tier: str = "motion"
    # What runs the models: cpu (ONNX Runtime), cuda (PyTorch), tensorrt, or auto (the fastest
    # present). One asked for and absent stops the start-up (service.pipeline.backends.base).
    backend: Literal["cpu", "cuda", "tensorrt", "auto"] = "cpu"
    # TensorRT engines, built on the first start and loaded after (None: beside the tier).
    engine_cache_dir: Path | None = None
    # One: the decoder runs in its own process beside inference and takes the other core; two
    # inference threads only contend with it (docs/benchmarks.md). 0 = one per core.
    intra_op_threads: int = Field(default=1, ge=0)
    # Logs: "text" for a terminal, "json" (one object a line) for a log pipeline.
    log_format: Literal["text", "json"] = "text"

    # Input limits: a tiny file can declare a huge frame or a 12-hour duration.
    max_upload_bytes: int = Field(default=2 * 1024**3, gt=0)
    max_duration_s: float = Field(default=3 * 3600.0, gt=0)
    max_pixels: int = Field(default=4096 * 2304, gt=0)
    decode_stall_timeout_s: float = Field(default=30.0, gt=0)
    # The decoder child's memory: a small file can declare frames whose buffers FFmpeg would
    # allocate before any size check can refuse them. 0: no limit.
    decode_memory_bytes: int = Field(default=2 * 1024**3, ge=0)
    # A slow or stalled upload holds a connection and a work folder: an upload that sends
    # nothing for this long, or that averages under upload_min_bytes_per_s once this long has
    # passed, is answered 408 and its bytes dropped.
    upload_idle_timeout_s: float = Field(default=30.0, gt=0)
    # A request's head (line and headers) must be in this long after its first byte.
    request_head_timeout_s: float = Field(default=10.0, gt=0)
    upload_min_bytes_per_s: int = Field(default=16 * 1024, ge=0)

    # A render already spreads over every core (intra-op threads): two at once only share them.
    max_concurrent_renders: int = Field(default=1, ge=1)
    # Renders that may wait for a slot before new requests get 503 busy, so uploads do not pile
    # up on disk behind a long queue.
    max_queued_renders: int = Field(default=8, ge=0)
    # Uploads received at once (renders and exports): a slot is taken before the body is read,
    # and a request with none free gets 503 busy at once, so the work dir holds at most this
    # many times max_upload_bytes of uploads in progress.
    max_concurrent_uploads: int = Field(default=8, ge=1)
    # Seconds of video the renders running and waiting may add up to, as their files declare
    # (a 12 KB file whose frames span hours is hours of work): past it, 503 busy; one render of
    # any length is always let in, alone.
    max_rendering_video_s: float = Field(default=3600.0, gt=0)
    # Connections the server holds at once (uvicorn's limit_concurrency): more get 503.
    max_connections: int = Field(default=256, ge=1)

    # Live preview (WebSocket /v1/preview, service.preview): one worker thread runs every session.
    preview_max_sessions: int = Field(default=16, ge=1)
    # How long the worker waits after a frame for other sessions' frames to batch with it.
    preview_batch_window_ms: float = Field(default=2.0, ge=0)
    # Frames waiting per session: past this the session's socket is not read (the client is
    # slowed, not closed) until the worker catches up.
    preview_queue_frames: int = Field(default=8, ge=1)
    # Audio a session may have made for it: its frames' time may run ahead of the wall clock at
    # most this fast, after a burst of preview_burst_s (frames 5 s apart sent at once would make
    # the shared worker render minutes of audio per second). Past it: `over_budget`.
    preview_max_speed: float = Field(default=4.0, gt=0)
    preview_burst_s: float = Field(default=10.0, gt=0)
    preview_send_queue: int = Field(default=64, ge=1)  # messages waiting for a slow reader
    preview_send_queue_bytes: int = Field(default=8 * 2**20, ge=1)  # and their audio's bytes
    # A session is idle, and closed, when its frames' timestamps advance less than a second in
    # this long (a client that sends a frame now and then does not hold a slot).
    preview_idle_timeout_s: float = Field(default=30.0, gt=0)
    # With API keys, the share of preview_max_sessions one key may hold (more: `key_busy`).
    preview_key_share: float = Field(default=0.5, gt=0.0, le=1.0)
    preview_max_frame_pixels: int = Field(default=1920 * 1080, gt=0)
    # Who may connect: API keys (none = open) and browser origins besides the service's own.
    api_keys: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)

    # Caches (service.cache). No URL: in this process, within a byte budget. With a URL: the
    # cache Redis (maxmemory + allkeys-lru), asked with short timeouts and no retries, behind a
    # circuit breaker, so a slow or absent Redis costs a request milliseconds, not seconds.
    redis_url: str | None = None
    cache_max_bytes: int = Field(default=256 * 1024**2, ge=0)  # in-process budget; 0 = no cache
    # Larger values are not cached: a Redis write must fit in `cache_timeout_s`, and a hit holds
    # its value in memory.
    cache_max_item_bytes: int = Field(default=8 * 1024**2, gt=0)
    cache_ttl_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    cache_timeout_s: float = Field(default=0.05, gt=0)  # connect and socket timeout
    cache_breaker_failures: int = Field(default=3, ge=1)  # failures in a row that open it
    cache_breaker_reset_s: float = Field(default=10.0, gt=0)  # then one trial call after this

    # Pipeline caches (service.pipeline: static, memo, windows). Static skip: a model frame whose
    # largest 8x8-block mean absolute difference (0..255 levels) to an encoded frame is under
    # this reuses its feature; 0 = off. See service.pipeline.static for the measurement.
    static_threshold: float = Field(default=0.5, ge=0)
    # Offline renders keep windows of generator + vocoder output and encoder features in the
    # cache above, and reuse them for the same content from the same state (re-renders, edits).
    window_memo: bool = True
    # Also reuse the vocoder's output for a repeated motion whose frames are not identical (the
    # generator still runs: contact events are always its own). `python -m bench.caches`.
    motion_templates: bool = True

    # Export jobs (service.jobs). No broker URL: an in-process pool runs them and keeps their
    # records in memory. With one: Celery workers (`foley worker`) on that Redis, which also
    # holds the job records (it wants noeviction and AOF, unlike the cache Redis).
    broker_url: str | None = None
    export_workers: int = Field(default=1, ge=1)  # in-process pool size
    export_max_pending: int = Field(default=100, ge=1)  # queued jobs before 503 busy
    # With API keys, the share of export_max_pending one key may hold (then 429 key_queue_full):
    # one tenant cannot lock the others out. Without keys there is one tenant, which may hold all.
    export_key_share: float = Field(default=0.5, gt=0.0, le=1.0)
    # `foley worker` serves its children's job metrics (service.jobs.metrics) here; 0: not at all.
    worker_metrics_port: int = Field(default=9808, ge=0, le=65535)
    # Uploads and results of jobs, shared by the API and the workers: required with a broker.
    # None (embedded): a temporary directory of this process's, removed with it.
    storage_dir: Path | None = None
    export_result_ttl_s: float = Field(default=24 * 3600.0, gt=0)
    export_soft_time_limit_s: float = Field(default=3600.0, gt=0)
    export_time_limit_s: float = Field(default=3900.0, gt=0)
    export_max_attempts: int = Field(default=3, ge=1)  # starts of one job, lost workers included
    # A running job's record is touched after every window it renders; one untouched this long
    # lost its worker (a killed `foley worker`, whose message Redis would hold back for the
    # visibility timeout) and goes back to the queue, its start counted.
    export_lease_s: float = Field(default=120.0, gt=0)
    # A worker told to stop (SIGTERM: a deploy, a scale-down) lets running renders finish for
    # this long, then hands them back to the queue at once (not after the visibility timeout).
    export_shutdown_grace_s: float = Field(default=30.0, ge=0)

    work_dir: Path | None = None  # temp files for uploads and renders; None = system temp
    host: str = "127.0.0.1"
    port: int = 8000

    def key_cap(self, total: int, share: float) -> int | None:
        """How many of `total` one API key may hold (at least one); None without keys, where
        there is one tenant and it may hold all."""
        return max(1, math.floor(total * share)) if self.api_keys else None

    @field_validator("redis_url", "broker_url", "storage_dir", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # FOLEY_REDIS_URL= in a compose file or shell means "none", not a URL.
        return None if value == "" else value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
