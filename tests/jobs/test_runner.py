"""`run_job` on its own (the memory store, a test engine): the moves a job makes when something
goes wrong, which the end-to-end tests cannot stage."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis

from service.config import Settings
from service.errors import DeviceOutOfMemory
from service.jobs.manager import JobManager
from service.jobs.records import JobRecord, new_job_id
from service.jobs.runner import JobContext, TransientJobError, give_up, run_job
from service.jobs.storage import JobStorage
from service.jobs.store import MemoryJobStore, Transition
from service.pipeline.types import RenderOptions
from tests.jobs.test_api import SteppedEngine


@pytest.fixture
def engine() -> SteppedEngine:
    return SteppedEngine()


@pytest.fixture
def ctx(tmp_path: Path, engine: SteppedEngine) -> JobContext:
    settings = Settings(cache_max_bytes=0, export_max_attempts=2)
    storage = JobStorage(tmp_path / "storage")
    return JobContext(settings, MemoryJobStore(), storage, lambda tier: engine)


def queued(ctx: JobContext) -> str:
    record = ctx.store.create(
        JobRecord(id=new_job_id(), tenant="t", options=RenderOptions(tier="export"))
    )
    upload = ctx.storage.receiving_dir() / "upload"
    upload.write_bytes(b"video")
    ctx.storage.adopt(record.id, upload)
    return record.id


@pytest.mark.parametrize(
    "error",
    [redis.ConnectionError("broker restarting"), DeviceOutOfMemory("the GPU is full for now")],
    ids=["broker", "gpu-memory"],
)
def test_a_transient_error_puts_the_job_back_in_the_queue(ctx, engine, error):
    job_id = queued(ctx)
    engine.fail_with = error
    with pytest.raises(TransientJobError):
        run_job(ctx, job_id)
    record = ctx.store.get(job_id)
    assert record.state == "queued" and record.attempts == 1
    assert ctx.storage.input_path(job_id).exists()  # kept for the retry
    engine.fail_with = None
    assert run_job(ctx, job_id).state == "succeeded"


def test_after_the_last_retry_it_fails_with_the_reason(ctx, engine):
    job_id = queued(ctx)
    engine.fail_with = redis.ConnectionError("broker gone")
    with pytest.raises(TransientJobError):
        run_job(ctx, job_id)
    record = give_up(ctx, job_id, "broker gone")
    assert record.state == "failed" and record.error.code == "transient_error"
    assert "broker gone" in record.error.reason
    assert not ctx.storage.job_dir(job_id).exists()


def test_a_job_past_its_deadline_stops_at_the_next_window(ctx, engine):
    ctx.settings = ctx.settings.model_copy(update={"export_soft_time_limit_s": 0.05})
    job_id = queued(ctx)
    original = engine.render

    def slow_render(*args, **kwargs):
        time.sleep(0.1)
        return original(*args, **kwargs)

    engine.render = slow_render
    record = run_job(ctx, job_id)
    assert record.state == "failed" and record.error.code == "time_limit"
    assert engine.windows_run == 1


def test_a_job_whose_worker_keeps_dying_fails_instead_of_looping(ctx):
    job_id = queued(ctx)
    for attempt in (0, 1):  # two starts whose worker died: the record says running
        started = {"state": "running", "attempts": attempt + 1}
        ctx.store.transition(job_id, Transition({"queued", "running"}, started, attempts=attempt))
    record = run_job(ctx, job_id)
    assert record.state == "failed" and record.error.code == "worker_lost"
    assert record.attempts == 2


def test_a_finished_job_delivered_again_is_left_alone(ctx, engine):
    job_id = queued(ctx)
    done = run_job(ctx, job_id)
    assert done.state == "succeeded"
    assert run_job(ctx, job_id) == done
    assert engine.windows_run == 10  # rendered once


def test_the_sweep_removes_expired_results_and_orphans_only(ctx):
    ctx.settings = ctx.settings.model_copy(update={"export_result_ttl_s": 1.0})
    done = queued(ctx)
    run_job(ctx, done)
    waiting = queued(ctx)
    orphan = ctx.storage.job_dir("no-record")
    orphan.mkdir()
    fresh = ctx.storage.job_dir("being-accepted")
    fresh.mkdir()
    old = time.time() - 120
    os.utime(orphan, (old, old))
    assert ctx.storage.sweep(ctx.store) == 1  # the orphan; the result has not expired yet
    time.sleep(1.5)  # the record expires; its directory was last written as long ago as that
    os.utime(ctx.storage.job_dir(done), (old, old))
    assert ctx.storage.sweep(ctx.store) == 1  # now the result
    assert not ctx.storage.job_dir(done).exists() and not orphan.exists()
    assert ctx.storage.input_path(waiting).exists()  # an active job keeps its files
    assert fresh.exists()  # no record yet, but too new to be an orphan


class _Queue:
    name = "test"

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, job_id: str) -> None:
        self.submitted.append(job_id)

    def close(self) -> None:
        pass


def test_a_running_job_that_shows_no_life_for_its_lease_goes_back_to_the_queue(ctx):
    queue = _Queue()
    manager = JobManager(ctx.settings, ctx.store, ctx.storage, queue)
    lost, alive, waiting = queued(ctx), queued(ctx), queued(ctx)
    now = time.time()
    lease = ctx.settings.export_lease_s
    for job_id, seen in ((lost, now - lease - 1), (alive, now - lease / 2)):
        ctx.store.transition(
            job_id,
            Transition({"queued"}, {"state": "running", "attempts": 1, "heartbeat_at": seen}),
        )
    assert manager.reap(now) == [lost]
    assert queue.submitted == [lost]
    back = ctx.store.get(lost)
    assert (back.state, back.attempts, back.worker) == ("queued", 1, None)  # its start counted
    assert ctx.store.get(alive).state == "running" and ctx.store.get(waiting).state == "queued"
    # Delivered again, it runs to the end as its second attempt.
    assert run_job(ctx, lost).state == "succeeded" and ctx.store.get(lost).attempts == 2


def test_each_window_an_attempt_renders_is_a_sign_of_life(ctx, engine):
    job_id = queued(ctx)
    beats: list[float] = []
    report = engine.render

    def render(input_path, output_path, options, progress=None):
        def beat(fraction: float) -> None:
            progress(fraction)
            beats.append(ctx.store.get(job_id).heartbeat_at)

        return report(input_path, output_path, options, beat)

    engine.render = render
    assert run_job(ctx, job_id).state == "succeeded"
    assert len(beats) == 10 and beats == sorted(beats) and beats[-1] > beats[0]
