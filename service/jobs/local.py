"""The embedded job queue: a pool of threads in this process runs the same `run_job` Celery
workers run. Jobs and records live as long as the process (no broker: nothing to survive in)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from service.jobs.runner import JobContext, TransientJobError, give_up, run_job

log = logging.getLogger(__name__)
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0)  # backoff for transient errors, then give up


class LocalQueue:
    name = "embedded"

    def __init__(self, ctx: JobContext, workers: int) -> None:
        self.ctx = ctx
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="foley-export")
        self._closed = threading.Event()

    def submit(self, job_id: str) -> None:
        self._pool.submit(self._run, job_id)

    def close(self) -> None:
        """Stop taking jobs. Queued and running jobs end with the process, as their records do."""
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job_id: str) -> None:
        for delay in (*RETRY_DELAYS_S, None):
            try:
                run_job(self.ctx, job_id)
                return
            except TransientJobError as exc:
                if delay is None:
                    give_up(self.ctx, job_id, str(exc))
                    return
                if self._closed.wait(delay):
                    return
            except Exception:
                log.exception("job %s: the runner failed", job_id)
                return
