"""Export jobs on Celery, with Redis as the broker (`FOLEY_BROKER_URL`); `foley worker` runs it.

The settings are those a long render queue needs (see the Celery notes in docs/exports.md):
- late acks and reject-on-worker-lost: a job whose worker child dies (SIGKILL, OOM) goes back
  to the queue instead of being acked and lost; `run_job` makes the second run safe, and its
  attempt count stops a job that kills every worker from looping;
- prefetch 1: a worker holds no job it is not running;
- a visibility timeout longer than the hard time limit: Redis redelivers an unacked job only
  after that, so a running job is never handed to a second worker;
- soft and hard time limits past the runner's own cooperative deadline, as backstops;
- a stopping worker (SIGTERM, remapped to Celery's cold shutdown by `foley worker`) gives its
  running renders `export_shutdown_grace_s` to finish, then hands them back to the queue.
Results are not stored in Celery: the job record in Redis is the only truth.

Each worker child loads its engines once, after the fork (`worker_process_init`).
"""

from __future__ import annotations

import logging
import multiprocessing
from typing import TYPE_CHECKING, Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery.signals import worker_process_init

from service.config import Settings
from service.errors import Problem
from service.jobs.runner import JobContext, TransientJobError, fail, give_up, run_job
from service.jobs.storage import JobStorage, storage_root
from service.jobs.store import RedisJobStore
from service.pipeline.loading import Engines

if TYPE_CHECKING:
    from billiard.einfo import ExceptionInfo

log = logging.getLogger(__name__)
EXPORT_TASK = "foley.export"
QUEUE = "foley.exports"
MAX_RETRIES = 5  # transient errors, with exponential backoff
SOFT_LIMIT_MARGIN_S = 60.0  # the runner's deadline first; Celery's soft limit if a window hangs
VISIBILITY_MARGIN_S = 600.0

_context: JobContext | None = None  # this process's, built once after the fork


def create_celery(settings: Settings) -> Celery:
    if settings.broker_url is None:
        raise ValueError("FOLEY_BROKER_URL is not set")
    app = Celery("foley", broker=settings.broker_url, set_as_current=False)
    visibility = round(settings.export_time_limit_s + VISIBILITY_MARGIN_S)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.export_soft_time_limit_s + SOFT_LIMIT_MARGIN_S,
        task_time_limit=max(
            settings.export_time_limit_s,
            settings.export_soft_time_limit_s + 2 * SOFT_LIMIT_MARGIN_S,
        ),
        task_ignore_result=True,
        task_default_queue=QUEUE,
        task_serializer="json",
        accept_content=["json"],
        broker_transport_options={"visibility_timeout": visibility},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # With SIGTERM remapped to a cold shutdown (`foley worker` does), a stopping worker
        # waits this long for its renders, then cancels them: their messages go back to the
        # queue for another worker, instead of waiting out the visibility timeout.
        worker_soft_shutdown_timeout=settings.export_shutdown_grace_s,
    )
    app.task(name=EXPORT_TASK, bind=True, base=ExportTask, max_retries=MAX_RETRIES)(export)
    return app


def context() -> JobContext:
    """This process's job context (a worker child's, or the solo pool's)."""
    global _context
    if _context is None:
        settings = Settings()
        assert settings.broker_url is not None
        _context = JobContext(
            settings=settings,
            store=RedisJobStore.from_url(settings.broker_url),
            storage=JobStorage(storage_root(settings)),
            engine_for=Engines(settings),
            timeouts=(SoftTimeLimitExceeded,),
        )
    return _context


@worker_process_init.connect
def _load_engines(**_: object) -> None:
    """Load and warm the default tier in each child as it starts, not on its first job."""
    # The decoder must run in its own process (a crash in FFmpeg must not take the worker child
    # with it), but a pool child is daemonic, and multiprocessing refuses children to a daemonic
    # process; the flag only means "terminate with the parent", which the decoder's own
    # lifetime handling covers. Its authkey is billiard's type, which the stdlib forkserver
    # cannot pass on: the same key as the stdlib's type.
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    config["daemon"] = False
    config["authkey"] = multiprocessing.process.AuthenticationString(bytes(config["authkey"]))  # type: ignore[attr-defined]
    ctx = context()
    ctx.engine_for(None)


class ExportTask(Task[[str], None]):  # export(job_id)
    def on_failure(
        self,
        exc: Exception,
        task_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        einfo: ExceptionInfo,
    ) -> None:
        # Celery's hard limit kills the child; this runs in the worker's main process.
        if isinstance(exc, TimeLimitExceeded) and args:
            limit = f"{self.app.conf.task_time_limit:.0f} s"
            error = Problem("time_limit", f"the render was stopped at its hard limit of {limit}")
            fail(context(), args[0], error)


def export(task: Task[[str], None], job_id: str) -> None:
    ctx = context()
    try:
        run_job(ctx, job_id)
    except TransientJobError as exc:
        retries = task.request.retries
        if retries >= MAX_RETRIES:
            give_up(ctx, job_id, str(exc))
            return
        raise task.retry(exc=exc, countdown=min(60, 2**retries)) from exc
