"""`foley preview`: the reference client against a real server over loopback."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from engines.eval.sync import read_audio
from service.api import create_app
from service.cli import main
from service.config import Settings
from service.pipeline.types import RenderOptions

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except urllib.error.HTTPError:
        return False


@pytest.fixture(scope="module")
def preview_url(real_engine) -> Iterator[str]:
    app = create_app(Settings(api_keys=["k1"]), engine_loader=lambda _: real_engine)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    while not _ready(f"http://127.0.0.1:{port}/readyz"):
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.05)
    try:
        yield f"ws://127.0.0.1:{port}/v1/preview"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_preview_streams_a_file_and_reports_latency(
    preview_url: str, real_engine, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "live.wav"
    args = ["preview", str(SAMPLE), "--url", preview_url, "--api-key", "k1", "--speed", "0"]
    assert main([*args, "-o", str(out)]) == 0
    printed = dict(
        line.strip().split(": ", 1) for line in capsys.readouterr().out.splitlines() if ": " in line
    )
    assert int(printed["frames"]) == 150 and int(printed["chunks"]) > 10
    assert float(printed["latency_ms_p99"]) > 0 and int(printed["onsets"]) > 0
    live, rate = read_audio(out)
    real_engine.render(SAMPLE, tmp_path / "offline.wav", RenderOptions(format="wav"))
    offline, _ = read_audio(tmp_path / "offline.wav")
    n = min(len(live), len(offline))
    assert rate == 48000 and n > 4 * rate
    assert abs(live[:n] - offline[:n]).max() <= 3 / 32768


def test_preview_without_the_key_is_refused(preview_url: str, capsys) -> None:
    assert main(["preview", str(SAMPLE), "--url", preview_url]) == 1
    assert "preview_refused" in capsys.readouterr().err
