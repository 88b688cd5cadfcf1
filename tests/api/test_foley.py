"""`POST /v1/foley` with a recording engine: parameters, response, error mapping, threading."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import opentimelineio as otio
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.api.params import download_name
from service.api.routes import server_timing
from service.config import Settings
from service.errors import LimitExceeded, MediaError
from service.markers import MarkersDocument
from tests.api.conftest import (
    GAIN_DB,
    RENDERED,
    SERVER_TIMING,
    RecordingEngine,
    upload,
    wait_no_files,
    wait_ready,
    wait_until,
)


def test_render_answers_the_file_with_timing_and_model_headers(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    response = client.post("/v1/foley", files=upload(name="my clip.mp4"))
    assert response.status_code == 200, response.text
    assert response.content == RENDERED
    assert response.headers["content-type"] == "audio/wav"
    assert response.headers["content-disposition"] == 'attachment; filename="my_clip.foley.wav"'
    assert response.headers["x-foley-tier"] == "test-tier"
    assert response.headers["x-foley-model-version"] == "0.0.1-test"
    assert response.headers["x-foley-duration"] == "2.500"
    timing = response.headers["server-timing"]
    assert SERVER_TIMING.match(timing), timing
    assert "decode;dur=12.3" in timing and "encoder;dur=45.6" in timing
    assert "vocoder;dur=100.0" in timing
    names = [metric.split(";")[0] for metric in timing.split(", ")]
    assert names == ["upload", "queue", "decode", "encoder", "vocoder", "render", "total"]
    assert engine.calls[0].options.format == "wav"
    assert engine.calls[0].options.sample_rate == 48000
    wait_no_files(work_dir)


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [("flac", "audio/flac"), ("mp4", "video/mp4"), ("mov", "video/quicktime"),
     ("mkv", "video/x-matroska")],
)  # fmt: skip
def test_format_picks_the_media_type(
    client: TestClient, engine: RecordingEngine, fmt: str, media_type: str
) -> None:
    response = client.post("/v1/foley", params={"format": fmt}, files=upload())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    assert response.headers["content-disposition"].endswith(f'.foley.{fmt}"')
    assert engine.calls[0].output_path.suffix == f".{fmt}"


def test_parameters_as_query_or_form_fields_mean_the_same(
    client: TestClient, engine: RecordingEngine
) -> None:
    client.post("/v1/foley", params={"format": "flac", "sample_rate": "16000"}, files=upload())
    client.post("/v1/foley", data={"format": "flac", "sample_rate": "16000"}, files=upload())
    assert engine.calls[0].options == engine.calls[1].options
    assert (engine.calls[0].options.format, engine.calls[0].options.sample_rate) == ("flac", 16000)


@pytest.mark.parametrize(("given", "replace"), [({}, False), ({"replace_audio": "true"}, True)])
def test_replace_audio_reaches_the_engine(
    client: TestClient, engine: RecordingEngine, given: dict, replace: bool
) -> None:
    response = client.post("/v1/foley", params={"format": "mp4", **given}, files=upload())
    assert response.status_code == 200, response.text
    assert engine.calls[0].options.replace_audio is replace


def test_damage_the_render_worked_around_is_a_header(
    client: TestClient, engine: RecordingEngine
) -> None:
    assert "x-foley-warning" not in client.post("/v1/foley", files=upload()).headers
    engine.warnings = ("3 of 90 video packets could not be decoded and were skipped",)
    answer = client.post("/v1/foley", params={"sample_rate": "16000"}, files=upload())
    assert answer.headers["x-foley-warning"] == engine.warnings[0]


def test_events_answer_the_contacts_as_json_and_otio(
    client: TestClient, engine: RecordingEngine
) -> None:
    response = client.post("/v1/foley", params={"format": "events"}, files=upload(name="a b.mp4"))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-disposition"] == 'attachment; filename="a_b.foley.json"'
    document = MarkersDocument.model_validate_json(response.content)
    assert [(c.time_s, c.material) for c in document.contacts] == [(0.5, "wood"), (1.5, None)]
    assert (document.video.file, document.audio_file) == ("a b.mp4", "a_b.foley.wav")
    assert engine.calls[0].options.format == "wav"  # rendered, then answered with its markers
    otio_answer = client.post("/v1/foley", data={"format": "otio"}, files=upload(name="a b.mp4"))
    assert otio_answer.status_code == 200, otio_answer.text
    timeline = otio.adapters.read_from_string(otio_answer.text, "otio_json")
    assert [m.metadata["foley"]["time_s"] for m in timeline.tracks.markers] == [0.5, 1.5]


@pytest.mark.parametrize(
    ("given", "target"), [({}, -23.0), ({"loudness": "-16"}, -16.0), ({"loudness": "off"}, None)]
)
def test_loudness_reaches_the_engine_and_its_gain_is_a_header(
    client: TestClient, engine: RecordingEngine, given: dict, target: float | None
) -> None:
    response = client.post("/v1/foley", params=given, files=upload())
    assert response.status_code == 200, response.text
    assert engine.calls[0].options.loudness == target
    gain = response.headers.get("x-foley-gain-db")
    assert gain == (None if target is None else f"{GAIN_DB:+.2f}")


def test_a_form_field_overrides_the_query_parameter_of_its_name(
    client: TestClient, engine: RecordingEngine
) -> None:
    response = client.post(
        "/v1/foley",
        params={"format": "wav", "loudness": "-16"},
        data={"format": "flac"},
        files=upload(),
    )
    assert response.status_code == 200, response.text
    assert engine.calls[0].options.format == "flac"
    assert engine.calls[0].options.loudness == -16.0


@pytest.mark.parametrize(
    ("params", "data"),
    [
        ({"format": "mp3"}, {}),
        ({"sample_rate": "22050"}, {}),
        ({"sample_rate": "fast"}, {}),
        ({}, {"format": "ogg"}),
        ({}, {"sample_rate": "8000"}),
        ({"loudness": "loud"}, {}),
        ({"loudness": "-80"}, {}),
        ({}, {"loudness": "0"}),
    ],
)
def test_bad_parameters_are_422_with_a_code(
    client: TestClient, engine: RecordingEngine, params: dict, data: dict, work_dir: Path
) -> None:
    response = client.post("/v1/foley", params=params, data=data, files=upload())
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter"
    assert next(iter({**params, **data})) in error["reason"]
    assert engine.calls == []
    assert list(work_dir.iterdir()) == []


def test_media_error_maps_to_422_with_its_code_and_reason(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    engine.fail_next = MediaError("no video stream in the upload", code="no_video_stream")
    response = client.post("/v1/foley", files=upload())
    assert response.status_code == 422
    assert response.json() == {
        "error": {"code": "no_video_stream", "reason": "no video stream in the upload"}
    }
    assert list(work_dir.iterdir()) == []


def test_limit_exceeded_from_the_engine_maps_to_413(
    client: TestClient, engine: RecordingEngine
) -> None:
    engine.fail_next = LimitExceeded("the video lasts 12 h; the limit is 3 h", code="too_long")
    response = client.post("/v1/foley", files=upload())
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_long"


def test_unexpected_error_is_500_json_and_the_server_keeps_serving(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    engine.fail_next = RuntimeError("onnxruntime exploded with /secret/path")
    response = client.post("/v1/foley", files=upload(), headers={"X-Request-ID": "req-500"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-500"
    error = response.json()["error"]
    assert error["code"] == "internal_error"
    assert "/secret/path" not in error["reason"]
    assert list(work_dir.iterdir()) == []

    again = client.post("/v1/foley", files=upload())
    assert again.status_code == 200
    assert again.content == RENDERED


def test_render_runs_in_a_worker_thread_not_on_the_event_loop(
    client: TestClient, engine: RecordingEngine
) -> None:
    client.post("/v1/foley", files=upload())
    call = engine.calls[0]
    assert call.on_event_loop is False
    assert call.thread is not threading.main_thread()


def test_work_files_are_removed_after_the_response(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    assert client.post("/v1/foley", files=upload()).status_code == 200
    request_dir = engine.calls[0].output_path.parent
    assert request_dir.parent == work_dir
    wait_until(lambda: not request_dir.exists(), what="request dir removed")
    assert list(work_dir.iterdir()) == []


def test_busy_when_too_many_renders_wait(settings: Settings, engine: RecordingEngine) -> None:
    app = create_app(
        settings.model_copy(update={"max_queued_renders": 0}), engine_loader=lambda *_: engine
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        response = client.post("/v1/foley", files=upload())
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "busy"
    assert response.headers["retry-after"]
    assert engine.calls == []


def test_server_timing_is_milliseconds_with_safe_names() -> None:
    header = server_timing({"decode": 0.0123, "mel spec": 1.5, "total": 2})
    assert header == "decode;dur=12.3, mel_spec;dur=1500.0, total;dur=2000.0"


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("clip.mp4", "clip.foley.wav"),
        ("../../etc/passwd", "passwd.foley.wav"),
        ('a"b;c.mov', "a_b_c.foley.wav"),
        (None, "clip.foley.wav"),
        ("..mp4", "clip.foley.wav"),
    ],
)
def test_download_name_is_header_safe(filename: str | None, expected: str) -> None:
    assert download_name(filename, "wav") == expected


def test_a_parameter_given_both_ways_alike_is_one_value(
    client: TestClient, engine: RecordingEngine
) -> None:
    both = {"replace_audio": "true", "loudness": "-23", "sample_rate": "48000"}
    response = client.post("/v1/foley", params=both, data=both, files=upload())
    assert response.status_code == 200, response.text
    assert engine.calls[0].options.replace_audio is True


def test_a_405_names_every_method_of_the_path(client: TestClient) -> None:
    response = client.request("PUT", "/v1/exports/some-job")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET, HEAD"


def test_renders_are_admitted_by_the_length_they_declare(
    settings: Settings, engine: RecordingEngine
) -> None:
    """A small file whose frames span an hour is an hour of work: with 100 s of video allowed,
    a second 80 s render waits for none (503 busy), however few bytes it is."""
    engine.duration_s, engine.windows, engine.window_s = 80.0, 40, 0.02
    app = create_app(
        settings.model_copy(update={"max_rendering_video_s": 100.0, "max_concurrent_renders": 2}),
        engine_loader=lambda *_: engine,
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.post, "/v1/foley", files=upload())
            wait_until(lambda: engine.windows_run > 0, 10, "the first render started")
            second = client.post("/v1/foley", files=upload())
            assert second.status_code == 503 and second.json()["error"]["code"] == "busy"
            assert "video to render" in second.json()["error"]["reason"]
            assert first.result().status_code == 200
        assert client.post("/v1/foley", files=upload()).status_code == 200  # its turn now
        engine.duration_s = 3600.0  # longer than all that is allowed: alone, it runs
        assert client.post("/v1/foley", files=upload()).status_code == 200
