"""`foley worker`: a Celery worker for export jobs."""

from __future__ import annotations

import argparse
import logging
import os

from service.cli.base import EXIT_OK
from service.config import Settings
from service.errors import InvalidInput

NAME, HELP = "worker", "run a Celery worker for export jobs (needs FOLEY_BROKER_URL)"
LOG_LEVEL = logging.INFO


def arguments(worker: argparse.ArgumentParser) -> None:
    worker.add_argument(
        "--concurrency", type=int, help="render processes (default: FOLEY_EXPORT_WORKERS)"
    )


def run(args: argparse.Namespace) -> int:
    settings = Settings()
    if settings.broker_url is None:
        raise InvalidInput("FOLEY_BROKER_URL is not set", code="no_broker")
    # SIGTERM (a deploy, a scale-down) as Celery's cold shutdown: renders get a grace period,
    # then go back to the queue. Read when billiard is imported, so set before it is.
    os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    if settings.worker_metrics_port:
        from service.jobs.exporter import serve_worker_metrics

        serve_worker_metrics(settings.worker_metrics_port)
    from service.jobs.celery_app import QUEUE, create_celery

    concurrency = args.concurrency or settings.export_workers
    level = "DEBUG" if args.verbose else "INFO"
    create_celery(settings).worker_main(
        [
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            f"--loglevel={level}",
            f"--queues={QUEUE}",
            f"--hostname=foley-{os.getpid()}@%h",  # several workers may share a host
            "--without-mingle",
            "--without-gossip",
        ]
    )
    return EXIT_OK
