"""The export API's contract on the embedded queue (no broker): states, results, cancel,
tenants, idempotency and refusals. The engine is a test double that the test steps through."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import opentimelineio as otio
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from service.errors import MediaError
from service.jobs.queues import create_job_manager
from service.markers import MarkersDocument
from service.media.loudness import Levelling, Loudness
from service.pipeline.loading import Engines
from service.pipeline.types import ContactMarker, RenderResult
from tests.jobs.conftest import StubEngine, finished, wait_for

WINDOWS = 10


class SteppedEngine:
    """Renders in WINDOWS windows, reporting progress after each; while `gate` is clear it
    waits before every window, so a test can hold a job mid-render."""

    tier = SimpleNamespace(name="motion", version="test", digest="0" * 16)

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.windows_run = 0
        self.fail_with: Exception | None = None
        self.loudness: list[float | None] = []  # each render's target
        self.replaced: list[bool] = []  # and its replace_audio
        self.ended = threading.Event()  # a render returned or raised

    def render(self, input_path: Path, output_path: Path, options, progress=None):
        try:
            return self._render(input_path, output_path, options, progress)
        finally:
            self.ended.set()

    def _render(self, input_path: Path, output_path: Path, options, progress=None):
        if self.fail_with is not None:
            raise self.fail_with
        for i in range(WINDOWS):
            assert self.gate.wait(timeout=30)
            self.windows_run += 1
            if progress is not None:
                progress((i + 1) / WINDOWS)
        output_path.write_bytes(b"track of " + input_path.read_bytes())
        self.loudness.append(options.loudness)
        self.replaced.append(options.replace_audio)
        target = options.loudness
        levelling = None if target is None else Levelling(target, 9.5, 0.0, Loudness(target, -2))
        return RenderResult(output_path, replace(options, tier="motion"), 2.0, 1.0, 30,
                            "test", {"total": 0.01}, levelling=levelling,
                            markers=(ContactMarker(0.25, "impact", 0.1, "metal"),),
                            video_fps=25.0)  # fmt: skip


@pytest.fixture
def engine() -> SteppedEngine:
    return SteppedEngine()


def client_for(engine: SteppedEngine, **settings) -> TestClient:
    config = Settings(cache_max_bytes=0, **settings)
    registry = Engines(config, preloaded={config.default_tier: engine})
    app = create_app(
        config,
        engine_loader=lambda *_: StubEngine(),
        job_manager=lambda s, cache, _: create_job_manager(s, cache, registry),
    )
    return TestClient(app)


@pytest.fixture
def api(engine):
    with client_for(engine) as client:
        yield client


def post(client: TestClient, data: bytes = b"video bytes", name: str = "reel 1.mov", **kw):
    return client.post("/v1/exports", files={"file": (name, data)}, **kw)


def test_a_job_is_accepted_runs_and_serves_its_result(api):
    response = post(
        api, params={"format": "flac", "sample_rate": "24000"}, headers={"X-Request-ID": "r-1"}
    )
    assert response.status_code == 202
    job = response.json()
    assert job["request_id"] == "r-1" == response.headers["x-request-id"]
    assert response.headers["location"] == f"/v1/exports/{job['id']}"
    assert len(job["id"]) >= 22  # 128 random bits
    assert (job["state"], job["tier"], job["format"], job["sample_rate"]) == (
        "queued", "motion", "flac", 24000,
    )  # fmt: skip
    done = wait_for(api, job["id"], finished)
    assert done["state"] == "succeeded" and done["progress"] == 1.0
    assert done["result_url"] == f"/v1/exports/{job['id']}/result"
    assert done["expires_at"] > done["finished_at"]
    result = api.get(done["result_url"])
    assert result.status_code == 200
    assert result.content == b"track of video bytes"
    assert result.headers["content-type"] == "audio/flac"
    assert 'filename="reel_1.foley.flac"' in result.headers["content-disposition"]


@pytest.mark.parametrize(
    ("given", "target", "gain"), [({}, -23.0, 9.5), ({"loudness": "off"}, None, None)]
)
def test_a_job_renders_at_its_loudness_and_records_the_gain(api, engine, given, target, gain):
    job = post(api, params=given).json()
    assert job["loudness"] == ("off" if target is None else target)
    done = wait_for(api, job["id"], finished)
    assert done["state"] == "succeeded"
    assert engine.loudness == [target]
    assert done["gain_db"] == gain


def test_a_job_keeps_the_original_audio_unless_told_to_replace_it(api, engine):
    kept = post(api, params={"format": "mp4"}).json()
    replaced = post(api, params={"format": "mp4", "replace_audio": "true"}).json()
    assert (kept["replace_audio"], replaced["replace_audio"]) == (False, True)
    wait_for(api, kept["id"], finished)
    wait_for(api, replaced["id"], finished)
    assert sorted(engine.replaced) == [False, True]


@pytest.mark.parametrize("fmt", ["json", "otio", "csv"])
def test_a_jobs_contact_markers_are_kept_beside_its_result(api, fmt):
    job_id = post(api, params={"format": "flac"}).json()["id"]
    wait_for(api, job_id, finished)
    response = api.get(f"/v1/exports/{job_id}/events", params={"format": fmt})
    assert response.status_code == 200, response.text
    assert f'filename="reel_1.foley.{fmt}"' in response.headers["content-disposition"]
    if fmt == "json":
        document = MarkersDocument.model_validate_json(response.content)
        assert (document.video.file, document.audio_file) == ("reel 1.mov", "reel_1.foley.flac")
        assert [(c.time_s, c.timecode) for c in document.contacts] == [(2.25, "00:00:02:06")]
    elif fmt == "otio":
        timeline = otio.adapters.read_from_string(response.text, "otio_json")
        assert [m.metadata["foley"]["material"] for m in timeline.tracks.markers] == ["metal"]
    else:
        assert response.text.splitlines()[1] == "2.25,00:00:02:06,impact,0.1,metal"


def test_progress_is_reported_while_running_and_no_result_before(api, engine):
    engine.gate.clear()
    job_id = post(api).json()["id"]
    wait_for(api, job_id, lambda j: j["state"] == "running")
    assert api.get(f"/v1/exports/{job_id}/result").json()["error"]["code"] == "no_result"
    assert api.get(f"/v1/exports/{job_id}/events").json()["error"]["code"] == "no_result"
    engine.gate.set()
    assert wait_for(api, job_id, finished)["state"] == "succeeded"


def test_cancel_stops_a_running_job_at_the_next_window(api, engine):
    engine.gate.clear()
    job_id = post(api).json()["id"]
    wait_for(api, job_id, lambda j: j["state"] == "running")
    cancelling = api.post(f"/v1/exports/{job_id}/cancel")
    assert cancelling.status_code == 202 and cancelling.json()["cancel_requested"]
    engine.gate.set()
    job = wait_for(api, job_id, finished)
    assert job["state"] == "cancelled"
    assert engine.windows_run == 1  # the window in flight, then it stopped
    assert api.post(f"/v1/exports/{job_id}/cancel").json()["error"]["code"] == "job_finished"


def test_a_deleted_job_is_gone_with_its_files(api, engine):
    storage = api.app.state.foley.jobs.storage
    done = wait_for(api, post(api).json()["id"], finished)
    assert done["state"] == "succeeded"
    assert storage.job_dir(done["id"]).exists()
    assert api.delete(f"/v1/exports/{done['id']}").status_code == 204
    for path in ("", "/result", "/events"):
        assert api.get(f"/v1/exports/{done['id']}{path}").status_code == 404
    assert not storage.job_dir(done["id"]).exists()
    assert api.delete(f"/v1/exports/{done['id']}").status_code == 404


def test_deleting_a_running_job_stops_it(api, engine):
    storage = api.app.state.foley.jobs.storage
    engine.gate.clear()
    job_id = post(api, headers={"Idempotency-Key": "take-2"}).json()["id"]
    wait_for(api, job_id, lambda j: j["state"] == "running")
    assert api.delete(f"/v1/exports/{job_id}").status_code == 204
    engine.gate.set()
    assert engine.ended.wait(timeout=10)
    assert engine.windows_run == 1  # the window in flight, then it stopped
    assert api.get(f"/v1/exports/{job_id}").status_code == 404
    assert not storage.job_dir(job_id).exists()
    again = post(api, headers={"Idempotency-Key": "take-2"})  # the key is free again
    assert again.json()["id"] != job_id


def test_export_jobs_are_in_the_metrics(api, engine):
    engine.gate.clear()
    held = post(api).json()["id"]
    wait_for(api, held, lambda j: j["state"] == "running")
    during = api.get("/metrics").text
    assert "foley_export_jobs_active 1.0" in during
    engine.gate.set()
    wait_for(api, held, finished)
    engine.fail_with = MediaError("no video stream in the file", code="no_video")
    wait_for(api, post(api).json()["id"], finished)
    after = api.get("/metrics").text
    assert "foley_export_jobs_active 0.0" in after
    assert 'foley_export_attempts_total{tier="motion"} 2.0' in after
    assert 'foley_export_jobs_finished_total{code="",state="succeeded"} 1.0' in after
    assert 'foley_export_jobs_finished_total{code="no_video",state="failed"} 1.0' in after
    assert 'foley_export_render_duration_seconds_count{tier="motion"} 2.0' in after


def test_a_job_that_fails_says_why(api, engine):
    engine.fail_with = MediaError("no video stream in the file", code="no_video")
    job = wait_for(api, post(api).json()["id"], finished)
    assert job["state"] == "failed"
    assert job["error"] == {"code": "no_video", "reason": "no video stream in the file"}
    assert job["attempts"] == 1


def test_an_idempotency_key_returns_the_first_job(api):
    first = post(api, headers={"Idempotency-Key": "reel-1/v3"})
    again = post(api, headers={"Idempotency-Key": "reel-1/v3"})
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    for change in ({"format": "flac"}, {"sample_rate": "16000"}, {"loudness": "off"},
                   {"replace_audio": "true"}):  # fmt: skip
        other = post(api, headers={"Idempotency-Key": "reel-1/v3"}, params=change)
        assert other.status_code == 422, change
        assert other.json()["error"]["code"] == "idempotency_key_reused"
    another_file = post(api, b"other video", headers={"Idempotency-Key": "reel-1/v3"})
    assert another_file.json()["error"]["code"] == "idempotency_key_reused"
    bad = post(api, headers={"Idempotency-Key": "x" * 256})
    assert bad.status_code == 422


def test_jobs_belong_to_their_key(engine):
    with client_for(engine, api_keys=["alice-key", "bob-key"]) as client:
        assert post(client).status_code == 401
        alice, bob = {"X-API-Key": "alice-key"}, {"X-API-Key": "bob-key"}
        job = post(client, headers=alice).json()["id"]
        assert client.get(f"/v1/exports/{job}", headers=alice).status_code == 200
        for method, path in (("get", ""), ("delete", ""), ("get", "/result")):
            theirs = client.request(method, f"/v1/exports/{job}{path}", headers=bob)
            assert theirs.status_code == 404
        assert client.get(f"/v1/exports/{job}").status_code == 401


def test_refusals(engine):
    with client_for(engine, export_max_pending=1) as client:
        assert post(client, params={"tier": "nope"}).json()["error"]["code"] == "unknown_tier"
        assert client.get("/v1/exports/unknown").status_code == 404
        engine.gate.clear()
        post(client)
        busy = post(client)
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "busy"
        assert busy.headers["retry-after"]  # as for a busy render: the same request later
        engine.gate.set()


def test_the_pending_cap_holds_under_concurrent_posts(engine):
    engine.gate.clear()  # every accepted job stays queued or running
    with client_for(engine, export_max_pending=3) as client, ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: post(client), range(20)))
        codes = sorted(a.status_code for a in answers)
        assert codes == [202] * 3 + [503] * 17
        engine.gate.set()


def test_one_key_holds_at_most_its_share_of_the_queue(engine):
    engine.gate.clear()
    keys = {"api_keys": ["alice-key", "bob-key"], "export_max_pending": 4}
    with client_for(engine, **keys) as client:
        alice, bob = {"X-API-Key": "alice-key"}, {"X-API-Key": "bob-key"}
        assert [post(client, headers=alice).status_code for _ in range(3)] == [202, 202, 429]
        refused = post(client, headers=alice)
        assert refused.json()["error"]["code"] == "key_queue_full"
        assert refused.headers["retry-after"]
        assert post(client, headers=bob).status_code == 202  # the other key still gets in
        engine.gate.set()
