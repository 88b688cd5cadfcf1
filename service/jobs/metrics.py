"""Prometheus metrics of export jobs, counted where their transitions happen: the API process
(its embedded pool's jobs, and the cancellations and queue failures it decides) on its /metrics,
and each Celery worker child, which `foley worker` serves on `FOLEY_WORKER_METRICS_PORT`, summed
over its children by prometheus_client's multiprocess mode.

    foley_export_attempts_total{tier}                 render attempts started
    foley_export_jobs_finished_total{state, code}     jobs ended (code: the error's, or "")
    foley_export_render_duration_seconds{tier}        one attempt's render, start to end

Jobs queued or running now (`foley_export_jobs_active`) are the store's to count: the API's
/metrics asks it at each scrape.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_SECONDS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class JobMetrics:
    """`registry`: where they are collected from; None in a Celery worker child, whose values go
    to the multiprocess directory."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.attempts = Counter(
            "foley_export_attempts", "Export render attempts started", ["tier"], registry=registry
        )
        self.finished = Counter(
            "foley_export_jobs_finished", "Export jobs ended, by state and error code",
            ["state", "code"], registry=registry,
        )  # fmt: skip
        self.render_seconds = Histogram(
            "foley_export_render_duration_seconds", "One export attempt's render",
            ["tier"], buckets=_SECONDS, registry=registry,
        )  # fmt: skip

    def collectors(self) -> list[Counter | Histogram]:
        return [self.attempts, self.finished, self.render_seconds]
