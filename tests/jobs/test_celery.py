"""Export jobs on real Celery workers and a real Redis: the reliability contract.

No accepted job is lost or run into two results: a killed worker child, a restarted broker and
a burst of concurrent (and repeated) submissions all end with every job done exactly once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions
from tests.conftest import wait_until
from tests.jobs.conftest import StubEngine, finished, submit, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference_engine():
    """The default tier in this process: what every job's result must equal."""
    engine = FoleyEngine.load(Settings(cache_max_bytes=0))
    engine.warmup()
    return engine


def reference_track(engine, clip: Path, tmp_path: Path) -> np.ndarray:
    from engines.eval.sync import read_audio

    out = tmp_path / f"{clip.stem}.reference.wav"
    engine.render(clip, out, RenderOptions(format="wav"))
    return read_audio(out)[0]


def result_track(client, job_id: str, tmp_path: Path) -> np.ndarray:
    from engines.eval.sync import read_audio

    response = client.get(f"/v1/exports/{job_id}/result")
    assert response.status_code == 200, response.text
    path = tmp_path / f"{job_id}.wav"
    path.write_bytes(response.content)
    return read_audio(path)[0]


def job_files(storage: Path, job_id: str) -> list[str] | None:
    """The names in the job's directory; None once the directory is gone."""
    try:
        return sorted(p.name for p in (storage / "jobs" / job_id).iterdir())
    except FileNotFoundError:
        return None


def files_become(storage: Path, job_id: str, expected: list[str] | None) -> None:
    """A worker records the job's end first and removes its files just after (`end_job`), so a
    client that has seen the end may still find them for a moment."""
    wait_until(lambda: job_files(storage, job_id) == expected, 10.0, f"job files {expected}")


def test_a_job_runs_on_a_worker_and_equals_a_local_render(
    api, workers, clip_factory, storage, reference_engine, tmp_path
):
    workers.start()
    clip = clip_factory(60)
    accepted = submit(api, clip)
    assert accepted.status_code == 202, accepted.text
    job = wait_for(api, accepted.json()["id"], finished)
    assert job["state"] == "succeeded", job
    assert job["attempts"] == 1 and job["progress"] == 1.0
    files_become(
        storage, job["id"], ["markers.json", "result.wav"]
    )  # the upload went, no staging left
    track = result_track(api, job["id"], tmp_path)
    reference = reference_track(reference_engine, clip, tmp_path)
    assert track.shape == reference.shape
    assert np.abs(track - reference).max() <= 2 / 32768  # both are 16-bit WAV
    # The worker's children counted it, and the worker serves their metrics.
    port = workers.metrics_ports[0]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    text = metrics.decode()
    assert 'foley_export_attempts_total{tier="motion"} 1.0' in text
    assert 'foley_export_jobs_finished_total{code="",state="succeeded"} 1.0' in text


def test_a_worker_child_killed_mid_job_loses_nothing(
    api, workers, clip_factory, storage, reference_engine, tmp_path
):
    workers.start()
    clip = clip_factory(1800)  # a minute of video: long enough to be caught mid-render
    job_id = submit(api, clip).json()["id"]
    running = wait_for(api, job_id, lambda j: j["state"] == "running" and j["progress"] > 0)
    assert running["progress"] < 1.0, "the render ended before the kill: make the clip longer"
    os.kill(int(running_worker_pid(api, job_id)), signal.SIGKILL)
    job = wait_for(api, job_id, finished)
    assert job["state"] == "succeeded", (job, workers.logs()[-3000:])
    assert job["attempts"] == 2  # the killed start and the one that finished
    files_become(
        storage, job_id, ["markers.json", "result.wav"]
    )  # exactly one result, no leftovers
    track = result_track(api, job_id, tmp_path)
    reference = reference_track(reference_engine, clip, tmp_path)
    assert track.shape == reference.shape
    assert np.abs(track - reference).max() <= 2 / 32768


def running_worker_pid(api, job_id: str) -> str:
    """The pid of the worker child running the job, from its record (`host:pid`)."""
    from service.jobs.store import RedisJobStore

    settings = api.app.state.foley.settings
    record = RedisJobStore.from_url(settings.broker_url).get(job_id)
    assert record is not None and record.worker is not None
    return record.worker.rsplit(":", 1)[1]


def test_queued_jobs_survive_a_broker_restart(api, broker, workers, clip_factory):
    clip = clip_factory(60)
    ids = [submit(api, clip).json()["id"] for _ in range(5)]  # no worker yet: all queued
    assert {api.get(f"/v1/exports/{i}").json()["state"] for i in ids} == {"queued"}
    broker.restart(crash=True)  # SIGKILL: AOF (fsync always) brings queue and records back
    workers.start()
    jobs = [wait_for(api, i, finished) for i in ids]
    assert [j["state"] for j in jobs] == ["succeeded"] * 5
    assert all(j["attempts"] == 1 for j in jobs)


def test_fifty_concurrent_submissions_all_complete_once(
    job_settings, workers, clip_factory, storage
):
    workers.start()
    workers.start()
    # Sixteen at once: the queue is under test here, not the upload slots.
    settings = job_settings.model_copy(update={"max_concurrent_uploads": 16})
    with TestClient(create_app(settings, engine_loader=lambda *_: StubEngine())) as api:
        _fifty_submissions(api, clip_factory, storage)


def _fifty_submissions(api, clip_factory, storage) -> None:
    clips = [clip_factory(30, variant) for variant in range(3)]
    # 20 requests share 5 idempotency keys (4 each), as retries of one request would; 30 are
    # unique. So 35 jobs.
    requests = [(clips[i % 5 % 3], {"Idempotency-Key": f"key-{i % 5}"}) for i in range(20)]
    requests += [(clips[i % 3], {}) for i in range(30)]
    barrier = threading.Barrier(16)

    def post(request):
        clip, headers = request
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=5)  # the last few requests run fewer at once
        return submit(api, clip, **headers)

    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(post, requests))
    assert [r.status_code for r in responses] == [202] * 50, [r.text for r in responses]
    by_key: dict[str, set[str]] = {}
    for (_, headers), response in zip(requests, responses, strict=True):
        if headers:
            by_key.setdefault(headers["Idempotency-Key"], set()).add(response.json()["id"])
    assert all(len(ids) == 1 for ids in by_key.values()), by_key
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 35
    jobs = [wait_for(api, i, finished, timeout_s=300) for i in ids]
    assert {j["state"] for j in jobs} == {"succeeded"}
    assert all(j["attempts"] == 1 for j in jobs)  # nothing ran twice
    for job in jobs:
        files_become(storage, job["id"], ["markers.json", "result.wav"])
    # Equal uploads give equal results, whichever worker ran them.
    digests: dict[str, set[str]] = {}
    for job in jobs:
        content = api.get(f"/v1/exports/{job['id']}/result").content
        digests.setdefault(job["filename"], set()).add(hashlib.sha256(content).hexdigest())
    assert all(len(d) == 1 for d in digests.values()), digests


def test_cancel_stops_a_running_job_within_a_window(api, workers, clip_factory, storage):
    workers.start()
    clip = clip_factory(1800)
    job_id = submit(api, clip).json()["id"]
    wait_for(api, job_id, lambda j: j["state"] == "running" and j["progress"] > 0)
    cancelling = api.post(f"/v1/exports/{job_id}/cancel")
    assert cancelling.status_code == 202
    at_cancel = cancelling.json()["progress"]
    job = wait_for(api, job_id, finished, timeout_s=10)
    assert job["state"] == "cancelled"
    # A window is one decoded batch: 32 frames of the 1800, under 2 % of the clip.
    assert job["progress"] - at_cancel <= 2 * 32 / 1800, (at_cancel, job["progress"])
    assert api.get(f"/v1/exports/{job_id}/result").status_code == 409
    files_become(storage, job_id, None)


def test_a_queued_job_is_cancelled_at_once(api, workers, clip_factory):
    clip = clip_factory(60)
    job_id = submit(api, clip).json()["id"]  # no worker yet
    cancelled = api.post(f"/v1/exports/{job_id}/cancel").json()
    assert cancelled["state"] == "cancelled"
    workers.start()
    after = submit(api, clip).json()["id"]  # the worker runs the next one...
    assert wait_for(api, after, finished)["state"] == "succeeded"
    job = api.get(f"/v1/exports/{job_id}").json()  # ...and never the cancelled one
    assert job["state"] == "cancelled" and job["attempts"] == 0


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_that_crashes_the_decoder_fails_once(api, workers, clip_factory):
    clip = clip_factory(60, variant=1)
    workers.start(env={"FOLEY_TEST_CRASH_DECODER": sha256_of(clip)})
    job = wait_for(api, submit(api, clip).json()["id"], finished)
    assert job["state"] == "failed"
    assert job["error"]["code"] == "decoder_crashed", job["error"]
    assert job["attempts"] == 1  # no retry, no loop
    fine = wait_for(api, submit(api, clip_factory(60)).json()["id"], finished)
    assert fine["state"] == "succeeded"  # the worker kept serving


def test_a_file_that_kills_its_worker_fails_after_the_attempt_limit(
    api, workers, clip_factory, job_settings
):
    clip = clip_factory(60, variant=2)
    workers.start(env={"FOLEY_TEST_KILL_WORKER": sha256_of(clip)})
    job = wait_for(api, submit(api, clip).json()["id"], finished)
    assert job["state"] == "failed"
    assert job["error"]["code"] == "worker_lost"
    assert job["attempts"] == job_settings.export_max_attempts
    fine = wait_for(api, submit(api, clip_factory(60)).json()["id"], finished)
    assert fine["state"] == "succeeded"


def test_with_the_broker_down_exports_are_refused_and_readyz_says_so(api, broker, clip_factory):
    broker.stop()
    refused = submit(api, clip_factory(60))
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "queue_unavailable"
    ready = api.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "degraded" and ready.json()["jobs"] == "unavailable"
    assert api.get("/v1/exports/anything").status_code == 503
    broker.start()
    assert api.get("/readyz").json()["status"] == "ready"


def test_a_stopped_worker_hands_its_running_job_back_at_once(
    api, workers, clip_factory, storage, reference_engine, tmp_path
):
    stopping = workers.start(env={"FOLEY_EXPORT_SHUTDOWN_GRACE_S": "0.2"})
    clip = clip_factory(1800)
    job_id = submit(api, clip).json()["id"]
    wait_for(api, job_id, lambda j: j["state"] == "running" and j["progress"] > 0)
    stopping.send_signal(signal.SIGTERM)  # a deploy: the grace is too short for this render
    stopping.wait(timeout=30)
    workers.start()
    # Back in the queue at once: done long before the visibility timeout (over an hour).
    job = wait_for(api, job_id, finished, timeout_s=60)
    assert job["state"] == "succeeded", (job, workers.logs()[-3000:])
    assert job["attempts"] == 2
    files_become(storage, job_id, ["markers.json", "result.wav"])
    track = result_track(api, job_id, tmp_path)
    assert np.abs(track - reference_track(reference_engine, clip, tmp_path)).max() <= 2 / 32768


def test_a_killed_worker_s_job_goes_back_to_the_queue_after_its_lease(
    job_settings, workers, clip_factory, storage
):
    """The whole `foley worker` killed (its message is unacked until the visibility timeout,
    over an hour): the job's lease runs out and the sweep hands it to the next worker."""
    settings = job_settings.model_copy(update={"export_lease_s": 2.0})
    with TestClient(create_app(settings, engine_loader=lambda *_: StubEngine())) as api:
        first = workers.start()
        job_id = submit(api, clip_factory(1800)).json()["id"]
        wait_for(api, job_id, lambda j: j["state"] == "running" and j["progress"] > 0)
        os.killpg(first.pid, signal.SIGKILL)
        jobs = api.app.state.foley.jobs
        assert jobs.reap() == []  # within its lease: still its worker's
        killed_at = time.monotonic()
        first.wait()
        workers.start()
        time.sleep(max(0.0, killed_at + 2.5 - time.monotonic()))
        assert jobs.reap() == [job_id]
        job = wait_for(api, job_id, finished, timeout_s=120)
        assert (job["state"], job["attempts"]) == ("succeeded", 2)
        files_become(storage, job_id, ["markers.json", "result.wav"])
