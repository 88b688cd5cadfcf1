"""What the API does with export jobs: accept, look up, cancel, delete; transport-free.

Accepting a job is ordered so that nothing accepted is lost and nothing half-made runs:
the record is created first (atomically with its idempotency key), then the upload is moved
into the job's directory, then the job is queued. A job that cannot be queued (broker down)
is failed at once and the request refused, so a client never holds an id that will not run.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

import redis

from service.config import Settings
from service.errors import Busy, FoleyError, InvalidInput, Problem
from service.jobs.metrics import JobMetrics
from service.jobs.records import JobRecord
from service.jobs.runner import end_job
from service.jobs.storage import JobStorage
from service.jobs.store import Caps, Full, JobStore, Transition

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


class JobQueue(Protocol):
    name: str  # "embedded" or "celery"

    def submit(self, job_id: str) -> None: ...

    def close(self) -> None: ...


class JobNotFound(FoleyError, code="job_not_found", status=404):
    pass


class JobConflict(FoleyError, code="job_conflict", status=409):
    """The job is not in a state that allows this (a result before it is done, ...)."""


class ResultExpired(FoleyError, code="result_expired", status=410):
    pass


class QueueFull(Busy):
    pass


class KeyQueueFull(FoleyError, code="key_queue_full", status=429, headers={"Retry-After": "5"}):
    """One API key holds its whole share of the export queue."""


class QueueUnavailable(FoleyError, code="queue_unavailable", status=503):
    pass


def _store_errors(method: Callable[P, R]) -> Callable[P, R]:
    """The store not answering (the broker Redis down) is the queue being unavailable: 503."""

    @functools.wraps(method)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except redis.RedisError as exc:
            raise QueueUnavailable(f"the job store is not answering ({exc})") from exc

    return wrapped


@dataclass(frozen=True)
class Accepted:
    record: JobRecord
    created: bool  # False: an earlier request with the same idempotency key made it


class JobManager:
    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        storage: JobStorage,
        queue: JobQueue,
        metrics: JobMetrics | None = None,
    ) -> None:
        self.settings, self.store, self.storage, self.queue = settings, store, storage, queue
        self.metrics = metrics or JobMetrics()  # the transitions decided here

    @property
    def caps(self) -> Caps:
        settings = self.settings
        total = settings.export_max_pending
        return Caps(total=total, per_tenant=settings.key_cap(total, settings.export_key_share))

    @_store_errors
    def check_capacity(self, tenant: str) -> None:
        """A quick refusal before an upload is read (`submit` holds the caps under
        concurrency)."""
        caps = self.caps
        if caps.total is not None and self.store.active_count() >= caps.total:
            raise _refusal(Full("total", caps.total))
        if caps.per_tenant is not None and self.store.active_count(tenant) >= caps.per_tenant:
            raise _refusal(Full("tenant", caps.per_tenant))

    @_store_errors
    def submit(self, record: JobRecord, upload: Path) -> Accepted:
        """Accept a job for the upload at `upload` (in `storage.receiving_dir()`); the upload is
        moved or removed."""
        try:
            try:
                stored = self.store.create(record, self.caps)
            except Full as full:
                raise _refusal(full) from None
            if stored.id != record.id:
                _check_same_request(stored, record)
                return Accepted(stored, created=False)
            self.storage.adopt(record.id, upload)
        finally:
            shutil.rmtree(upload.parent, ignore_errors=True)
        try:
            self.queue.submit(record.id)
        except Exception as exc:
            log.exception("job %s could not be queued", record.id)
            reason = f"the job queue is unavailable ({type(exc).__name__})"
            error = Problem("queue_unavailable", reason)
            self._end(record.id, "failed", expect={"queued"}, error=error)
            raise QueueUnavailable(reason) from exc
        log.info("job %s queued (%s, %s)", record.id, record.tier, record.format)
        return Accepted(record, created=True)

    @_store_errors
    def get(self, tenant: str, job_id: str) -> JobRecord:
        """The tenant's job; another tenant's is as unknown as one that never was."""
        record = self.store.get(job_id)
        if record is None or record.tenant != tenant:
            raise JobNotFound(f"no export job {job_id!r}")
        return record

    @_store_errors
    def cancel(self, tenant: str, job_id: str) -> JobRecord:
        """A queued job is cancelled at once; a running one at its next window."""
        record = self.get(tenant, job_id)
        if record.finished:
            raise JobConflict(f"the job has already {record.state}", code="job_finished")
        cancelled = self._end(job_id, "cancelled", expect={"queued"}, cancel_requested=True)
        if cancelled is not None:
            return cancelled
        flagged = self.store.transition(job_id, Transition({"running"}, {"cancel_requested": True}))
        return flagged or self.get(tenant, job_id)

    @_store_errors
    def delete(self, tenant: str, job_id: str) -> JobRecord:
        """Forget the job: its record, result and files. One still running stops at its next
        window (it finds its record gone); what it leaves, the storage sweep removes."""
        record = self.get(tenant, job_id)
        self.store.delete(job_id)
        self.storage.remove(job_id)
        log.info("job %s deleted (%s)", job_id, record.state)
        return record

    @_store_errors
    def result(self, tenant: str, job_id: str) -> tuple[JobRecord, Path]:
        record = self.get(tenant, job_id)
        if record.state != "succeeded":
            raise JobConflict(f"the job has no result: it is {record.state}", code="no_result")
        path = self.storage.result_path(job_id, record.format)
        if not path.is_file():
            raise ResultExpired("the result has expired")
        return record, path

    def markers(self, tenant: str, job_id: str) -> tuple[JobRecord, Path]:
        """The contact markers of a job's result (service.markers' JSON document)."""
        record, _ = self.result(tenant, job_id)
        path = self.storage.markers_path(job_id)
        if not path.is_file():
            raise ResultExpired("the result has expired")
        return record, path

    def healthy(self) -> bool:
        return self.store.healthy()

    def _end(self, job_id: str, state: str, **kwargs: Any) -> JobRecord | None:
        ttl_s = self.settings.export_result_ttl_s
        return end_job(
            self.store, self.storage, ttl_s, job_id, state, metrics=self.metrics, **kwargs
        )

    def sweep(self) -> int:
        return self.storage.sweep(self.store)

    @_store_errors
    def reap(self, now: float | None = None) -> list[str]:
        """Running jobs whose attempt showed no sign of life for `export_lease_s` go back to
        the queue (a compare-and-set on that attempt: a late worker that wakes finds its job
        gone and stops); their start stays counted, so a job that kills every worker still
        ends `worker_lost`. -> the ids requeued."""
        now = time.time() if now is None else now
        lease = self.settings.export_lease_s
        requeued = []
        for job_id in self.store.active_ids():
            record = self.store.get(job_id)
            if record is None or record.state != "running":
                continue
            seen = record.heartbeat_at or record.started_at or record.created_at
            if now - seen <= lease:
                continue
            back = self.store.transition(
                job_id,
                Transition(
                    {"running"}, {"state": "queued", "worker": None}, attempts=record.attempts
                ),
            )
            if back is None:
                continue
            log.warning(
                "job %s: no sign of life from %s for %.0f s; back in the queue",
                job_id, record.worker, now - seen,
            )  # fmt: skip
            self.queue.submit(job_id)
            requeued.append(job_id)
        return requeued

    def close(self) -> None:
        self.queue.close()
        if self.storage.owned:
            shutil.rmtree(self.storage.root, ignore_errors=True)


def _refusal(full: Full) -> FoleyError:
    if full.scope == "tenant":
        return KeyQueueFull(
            f"this API key has {full.cap} export jobs queued or running, its share of the "
            "queue; retry later"
        )
    return QueueFull(f"{full.cap} export jobs are already queued or running; retry later")


def _check_same_request(earlier: JobRecord, now: JobRecord) -> None:
    """An idempotency key stands for one request: reusing it for another is a client bug."""
    if (earlier.options, earlier.upload_sha256) != (now.options, now.upload_sha256):
        o = earlier.options
        raise InvalidInput(
            "this Idempotency-Key was used for another request (another file or parameters: "
            f"{o.format}, {o.sample_rate} Hz, tier {o.tier})",
            code="idempotency_key_reused",
        )
