"""Export jobs: records (`records`, `store`), files (`storage`), the job itself (`runner`), and
two ways to run it with one code path: an in-process pool (`local`, the embedded default) or
Celery workers on Redis (`celery_app`, with `FOLEY_BROKER_URL`).

The package imports nothing itself: `foley worker` names prometheus_client's multiprocess
directory (`exporter`) before any of its modules load the metrics.
"""
