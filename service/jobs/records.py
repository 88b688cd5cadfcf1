"""Export job records: the one source of truth about a job, whatever runs it.

A record is created `queued` when the API accepts a job and moves only along

    queued -> running -> succeeded | failed | cancelled
    queued -> cancelled | failed
    running -> queued          (a transient error: the job will be retried)
    running -> running         (a lost worker's job started again; `attempts` counts the starts)

Every move is a compare-and-set on the current state (`JobStore.transition`), so two deliveries
of one job can never both finish it: exactly one terminal state, exactly one result.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from service.errors import Problem
from service.pipeline.types import RenderOptions

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
ACTIVE: frozenset[str] = frozenset({"queued", "running"})


def new_job_id() -> str:
    """128 random bits, URL-safe: unguessable, so an id is no key to somebody else's job."""
    return secrets.token_urlsafe(16)


@dataclass(frozen=True)
class JobRecord:
    id: str
    tenant: str  # whose job: derived from the API key ("public" without keys)
    options: RenderOptions  # as rendered: the tier named (the default resolved when accepted)
    filename: str | None = None  # the upload's name, for the download's name
    request_id: str | None = None  # of the request that made it: its logs carry it too
    idempotency_key: str | None = None
    upload_sha256: str | None = None  # tells a retried request from another with the same key
    state: JobState = "queued"
    progress: float = 0.0  # 0..1 of the video decoded and rendered
    attempts: int = 0  # starts, a lost worker's included
    cancel_requested: bool = False
    created_at: float = field(default_factory=time.time)  # unix seconds
    started_at: float | None = None
    heartbeat_at: float | None = None  # unix seconds: the running attempt's last sign of life
    finished_at: float | None = None
    expires_at: float | None = None  # set when finished: record and result go after this
    worker: str | None = None  # host:pid of the process running it (for operators and tests)
    duration_s: float | None = None  # of the video, once rendered
    result_bytes: int | None = None
    gain_db: float | None = None  # the loudness gain the render applied
    warnings: list[str] = field(default_factory=list)  # damage in the file, worked around
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    error: Problem | None = None

    def __post_init__(self) -> None:
        if self.options.tier is None:
            raise ValueError("a job's options name its tier")

    @property
    def format(self) -> str:
        return self.options.format

    @property
    def tier(self) -> str:
        assert self.options.tier is not None
        return self.options.tier

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def to_fields(self) -> dict[str, Any]:
        return asdict(self) | {"options": self.options.to_wire()}

    @classmethod
    def from_fields(cls, raw: dict[str, Any]) -> JobRecord:
        """A stored record, its options checked again (a store is not trusted to hold only
        what this code wrote). Records written before the options were one field keep them
        flat, `loudness_lufs` for `loudness`."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        if "options" not in raw:
            named = ("format", "sample_rate", "tier", "replace_audio")
            flat = {k: raw[k] for k in named if k in raw}
            if "loudness_lufs" in raw:
                flat["loudness"] = raw["loudness_lufs"]
            values["options"] = RenderOptions(**flat)
        else:
            values["options"] = RenderOptions.from_wire(values["options"])
        if values.get("error") is not None:
            values["error"] = Problem(**values["error"])
        return cls(**values)

    def updated(self, **changes: Any) -> JobRecord:
        return replace(self, **changes)
