"""The export job itself: one function both the in-process pool and Celery workers call.

`run_job` is idempotent: it may be delivered twice (a worker lost mid-job, a redelivered
message) and the job still ends with exactly one terminal state and one result file:
- a finished job is left alone;
- each start is a compare-and-set on (state, attempts), so one delivery wins a start;
- an attempt renders into its own staging file and renames it into place only when done;
- the final transition is a compare-and-set on that attempt's number.
A job that keeps killing its worker is started at most `export_max_attempts` times, then fails
with `worker_lost` instead of looping.

Cancellation and the soft deadline are cooperative: the engine reports progress after every
decoded batch (one window of frames), and that is where a job notices them and stops.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import redis

from service.config import Settings
from service.context import REQUEST_ID
from service.errors import DeviceOutOfMemory, FoleyError, Problem
from service.jobs.metrics import JobMetrics
from service.jobs.records import ACTIVE, JobRecord
from service.jobs.storage import JobStorage
from service.jobs.store import JobStore, Transition
from service.markers import markers_document, render_markers
from service.pipeline.loading import Engine

log = logging.getLogger(__name__)


class TransientJobError(Exception):
    """The job may succeed if tried again later (the store or the disk hiccupped)."""


class _Stop(Exception):
    """Raised from the progress callback to end an attempt between windows."""

    def __init__(self, state: str, error: Problem | None = None) -> None:
        super().__init__(state)
        self.state, self.error = state, error


# What counts as transient: the store's connection, the shared disk, a GPU out of memory for now.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    DeviceOutOfMemory,
)


@dataclass
class JobContext:
    """What a process needs to run jobs; built once per process (per Celery child, after fork)."""

    settings: Settings
    store: JobStore
    storage: JobStorage
    engine_for: Callable[[str | None], Engine]  # tier name -> a loaded, warmed engine
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # Exceptions that mean "the job ran out of time" (Celery's soft limit) besides our deadline.
    timeouts: tuple[type[BaseException], ...] = ()
    metrics: JobMetrics = field(default_factory=JobMetrics)


def run_job(ctx: JobContext, job_id: str) -> JobRecord | None:
    """Run one attempt of the job; returns its record afterwards (None if it expired).

    Raises TransientJobError when the attempt should be retried later (the job is then back in
    `queued`)."""
    store = ctx.store
    record = store.get(job_id)
    if record is None or record.finished:
        return record
    if record.cancel_requested:
        return _finish(ctx, record, "cancelled", expect=ACTIVE)
    if record.attempts >= ctx.settings.export_max_attempts:
        reason = (
            f"the job was started {record.attempts} times and its worker was lost each time "
            "(the file may crash the renderer)"
        )
        return _finish(ctx, record, "failed", Problem("worker_lost", reason), expect=ACTIVE)
    now = time.time()
    started = store.transition(
        job_id,
        Transition(
            ACTIVE,
            {
                "state": "running",
                "attempts": record.attempts + 1,
                "started_at": now,
                "heartbeat_at": now,
                "worker": ctx.worker,
                "progress": 0.0,
            },
            attempts=record.attempts,
        ),
    )
    if started is None:  # another delivery started it first, or it was cancelled
        return store.get(job_id)
    ctx.metrics.attempts.labels(started.tier).inc()
    log.info("job %s: attempt %d on %s", job_id, started.attempts, ctx.worker)
    return _attempt(ctx, started)


def _attempt(ctx: JobContext, record: JobRecord) -> JobRecord | None:
    token = REQUEST_ID.set(record.request_id or record.id)  # its log lines name its request
    try:
        return _attempt_in_context(ctx, record)
    finally:
        REQUEST_ID.reset(token)


def _attempt_in_context(ctx: JobContext, record: JobRecord) -> JobRecord | None:
    storage, settings = ctx.storage, ctx.settings
    storage.clear_staging(record.id)
    staging = storage.staging_path(record.id, record.format, secrets.token_hex(4))
    deadline = time.monotonic() + settings.export_soft_time_limit_s
    started = time.perf_counter()
    try:
        engine = ctx.engine_for(record.tier)
        result = engine.render(
            storage.input_path(record.id),
            staging,
            record.options,
            progress=_progress(ctx, record, deadline),
        )
        # The markers first: a result in place always has them beside it.
        markers = storage.staging_path(record.id, "json", secrets.token_hex(4))
        document = markers_document(result, video_name=None, audio_name=None)
        markers.write_text(render_markers(document, "json"))
        os.replace(markers, storage.markers_path(record.id))
        final = storage.result_path(record.id, record.format)
        os.replace(staging, final)
        return _finish(
            ctx,
            record,
            "succeeded",
            progress=1.0,
            duration_s=result.duration_s,
            result_bytes=final.stat().st_size,
            gain_db=None if result.levelling is None else result.levelling.gain_db,
            warnings=list(result.warnings),
            timings=result.timings,
        )
    except _Stop as stop:
        if stop.state == "lost":  # no longer this attempt's job: leave it as it is
            return ctx.store.get(record.id)
        return _finish(ctx, record, stop.state, stop.error)
    except TRANSIENT_ERRORS as exc:
        log.warning("job %s: transient error, to be retried: %s", record.id, exc)
        ctx.store.transition(
            record.id, Transition({"running"}, {"state": "queued"}, attempts=record.attempts)
        )
        raise TransientJobError(str(exc)) from exc
    except FoleyError as exc:  # the input's fault: trying again gives the same answer
        return _finish(ctx, record, "failed", Problem(exc.code, exc.reason))
    except ctx.timeouts:
        return _finish(ctx, record, "failed", _time_limit(settings))
    except Exception as exc:
        log.exception("job %s failed", record.id)
        error = Problem("render_failed", f"internal error ({type(exc).__name__}); see the log")
        return _finish(ctx, record, "failed", error)
    finally:
        staging.unlink(missing_ok=True)
        ctx.metrics.render_seconds.labels(record.tier).observe(time.perf_counter() - started)


def _progress(ctx: JobContext, record: JobRecord, deadline: float) -> Callable[[float], None]:
    """Record progress after each window, and stop the attempt there if the job was cancelled
    or ran out of time."""

    def report(fraction: float) -> None:
        now = ctx.store.transition(
            record.id,
            Transition(
                {"running"},
                {"progress": round(fraction, 4), "heartbeat_at": time.time()},
                attempts=record.attempts,
            ),
        )
        if now is None:  # no longer this attempt's job: stop without touching it
            raise _Stop("lost")
        if now.cancel_requested:
            raise _Stop("cancelled")
        if time.monotonic() > deadline:
            raise _Stop("failed", _time_limit(ctx.settings))

    return report


def _time_limit(settings: Settings) -> Problem:
    limit = settings.export_soft_time_limit_s
    return Problem("time_limit", f"the render took longer than its limit of {limit:.0f} s")


def _finish(
    ctx: JobContext,
    record: JobRecord,
    state: str,
    error: Problem | None = None,
    *,
    expect: frozenset[str] | set[str] = frozenset({"running"}),
    **changes: object,
) -> JobRecord | None:
    """End this attempt's job (a compare-and-set on its attempt number); the record as it is
    afterwards, whoever ended it."""
    done = end_job(
        ctx.store, ctx.storage, ctx.settings.export_result_ttl_s, record.id, state,
        expect=expect, error=error, attempts=record.attempts, metrics=ctx.metrics, **changes,
    )  # fmt: skip
    return done or ctx.store.get(record.id)


def end_job(
    store: JobStore,
    storage: JobStorage,
    ttl_s: float,
    job_id: str,
    state: str,
    *,
    expect: Collection[str],
    error: Problem | None = None,
    attempts: int | None = None,
    metrics: JobMetrics | None = None,
    **changes: object,
) -> JobRecord | None:
    """A job's one terminal transition, if its state is in `expect` (and its attempts equal
    `attempts` when given); then its files go: the input, and all of them unless it succeeded.
    Record and result expire `ttl_s` later. None if the job had moved on."""
    now = time.time()
    done = store.transition(
        job_id,
        Transition(
            expect,
            {
                "state": state,
                "error": error,
                "finished_at": now,
                "expires_at": now + ttl_s,
                **changes,
            },
            attempts=attempts,
            ttl_s=ttl_s,
        ),
    )
    if done is None:
        return None
    if metrics is not None:
        metrics.finished.labels(state, error.code if error else "").inc()
    if state == "succeeded":
        storage.remove_input(job_id)
    else:
        storage.remove(job_id)
    log.info("job %s: %s%s", job_id, state, f" ({error.code})" if error else "")
    return done


def give_up(ctx: JobContext, job_id: str, reason: str) -> JobRecord | None:
    """After the last retry of a transient error: the job fails instead of waiting forever."""
    reason = f"gave up after repeated transient errors: {reason}"
    return fail(ctx, job_id, Problem("transient_error", reason))


def fail(ctx: JobContext, job_id: str, error: Problem) -> JobRecord | None:
    """End a job that is not finished yet as failed (from outside its attempt)."""
    record = ctx.store.get(job_id)
    if record is None or record.finished:
        return record
    return _finish(ctx, record, "failed", error, expect=ACTIVE)
