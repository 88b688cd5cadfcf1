"""The export worker's metrics endpoint: its children's job metrics (service.jobs.metrics),
each child a process of its own, served from the parent."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile

logger = logging.getLogger(__name__)


def serve_worker_metrics(port: int) -> None:
    """Serve the job metrics of this worker's children (each its own process) on `port`:
    prometheus_client's multiprocess mode, each child writing to files in one directory that
    this process reads at each scrape. The directory must be named before prometheus_client is
    first imported, and start empty."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before its multiprocess directory")
    directory = tempfile.mkdtemp(prefix="foley-worker-metrics-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
    logger.info("worker metrics on :%d/metrics", port)
