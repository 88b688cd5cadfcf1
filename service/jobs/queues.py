"""Which queue runs export jobs, chosen by the settings: the manager the API holds."""

from __future__ import annotations

import tempfile
from pathlib import Path

from service.cache.base import Cache
from service.config import Settings
from service.jobs.manager import JobManager
from service.jobs.metrics import JobMetrics
from service.jobs.storage import JobStorage, storage_root
from service.jobs.store import MemoryJobStore, RedisJobStore
from service.pipeline.loading import Engines


class CeleryQueue:
    """Sends jobs to the Celery workers (the API side: it never loads a model)."""

    name = "celery"

    def __init__(self, settings: Settings) -> None:
        from service.jobs.celery_app import EXPORT_TASK, QUEUE, create_celery

        self.app = create_celery(settings)
        self.task, self.queue = EXPORT_TASK, QUEUE

    def submit(self, job_id: str) -> None:
        self.app.send_task(self.task, args=[job_id], queue=self.queue)

    def close(self) -> None:
        self.app.close()


def create_job_manager(
    settings: Settings, cache: Cache | None = None, engines: Engines | None = None
) -> JobManager:
    """Embedded without a broker URL (jobs run in this process and keep their pipeline caches in
    `cache`, the process's one store), Celery with one."""
    if settings.broker_url is not None:
        storage = JobStorage(storage_root(settings))
        records = RedisJobStore.from_url(settings.broker_url)
        return JobManager(settings, records, storage, CeleryQueue(settings))
    from service.jobs.local import LocalQueue
    from service.jobs.runner import JobContext

    # The embedded queue's records live in memory: its files go with the process too.
    if settings.storage_dir is None:
        storage = JobStorage(Path(tempfile.mkdtemp(prefix="foley-exports-")), owned=True)
    else:
        storage = JobStorage(settings.storage_dir)
    store = MemoryJobStore()
    engine_for = engines or Engines(settings, cache=cache)
    ctx = JobContext(settings, store, storage, engine_for, metrics=JobMetrics())
    queue = LocalQueue(ctx, settings.export_workers)
    return JobManager(settings, store, storage, queue, metrics=ctx.metrics)
