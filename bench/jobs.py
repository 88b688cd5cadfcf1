"""Export queue throughput: jobs per minute on Celery workers, and on the embedded pool.

    python -m bench.jobs [--jobs 24] [--workers 1 2]

Each job renders the 10 s 1280x720 H.264 clip of bench.offline to WAV with the `export` tier.
Celery: a broker Redis as deployed (noeviction, AOF), `foley worker --concurrency N` in its own
process, jobs accepted through `JobManager` as the API accepts them; timed from the first
submission to the last job finished. The caches are off (FOLEY_CACHE_MAX_BYTES=0): every job is
a full render, not a repeat answered from the window memo. The embedded row runs the same jobs
on the in-process pool (one thread), for comparison.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.machine import describe
from bench.offline import CLIP_SECONDS, bench_clip
from bench.servers import redis_server
from service.config import Settings
from service.jobs.manager import JobManager
from service.jobs.queues import create_job_manager
from service.jobs.records import JobRecord, new_job_id
from service.pipeline.types import RenderOptions

BROKER_REDIS = ("--maxmemory-policy", "noeviction", "--appendonly", "yes",
                "--appendfsync", "always")  # fmt: skip


@contextmanager
def celery_worker(env: dict[str, str], concurrency: int, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker", f"--concurrency={concurrency}"],
            env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        time.sleep(1.0)  # the children load and warm the model after "ready"
        yield
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def run_jobs(manager: JobManager, clip: Path, jobs: int) -> float:
    """Submit `jobs` renders of `clip` at once; seconds until the last one finished."""
    started = time.perf_counter()
    ids = []
    for _ in range(jobs):
        upload = manager.storage.receiving_dir() / "upload"
        shutil.copyfile(clip, upload)
        record = JobRecord(new_job_id(), "bench", RenderOptions(tier="export"), filename=clip.name)
        ids.append(manager.submit(record, upload).record.id)
    pending = set(ids)
    while pending:
        for job_id in list(pending):
            record = manager.store.get(job_id)
            assert record is not None
            if record.finished:
                if record.state != "succeeded":
                    raise RuntimeError(f"job {job_id} {record.state}: {record.error}")
                pending.discard(job_id)
        time.sleep(0.02)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    clip = bench_clip()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        base = {"FOLEY_CACHE_MAX_BYTES": "0", "FOLEY_STORAGE_DIR": str(Path(tmp) / "storage")}
        for workers in args.workers:
            with redis_server(*BROKER_REDIS) as url:
                env = {**base, "FOLEY_BROKER_URL": url}
                settings = Settings(
                    cache_max_bytes=0, storage_dir=Path(tmp) / "storage", broker_url=url
                )
                manager = create_job_manager(settings)
                with celery_worker(env, workers, Path(tmp) / f"worker-{workers}.log"):
                    run_jobs(manager, clip, 2 * workers)  # warm: every child has rendered
                    seconds = run_jobs(manager, clip, args.jobs)
                manager.close()
            rows.append((f"Celery, {workers} worker process{'es' if workers > 1 else ''}", seconds))
        settings = Settings(cache_max_bytes=0, storage_dir=Path(tmp) / "embedded")
        manager = create_job_manager(settings)
        run_jobs(manager, clip, 1)
        rows.append(("embedded pool, 1 thread", run_jobs(manager, clip, args.jobs)))
        manager.close()
    print(describe())
    print(f"clip: {clip.name} ({CLIP_SECONDS:.0f} s of video), WAV, tier export, caches off; "
          f"{args.jobs} jobs submitted at once")  # fmt: skip
    print()
    print("| runner | jobs | wall s | jobs / min | video s rendered / s |")
    print("|---|---|---|---|---|")
    for name, seconds in rows:
        per_min = args.jobs / seconds * 60
        print(f"| {name} | {args.jobs} | {seconds:.1f} | {per_min:.0f} | "
              f"{args.jobs * CLIP_SECONDS / seconds:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
