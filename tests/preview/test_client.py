"""`foley preview`: the reference client against a real server over loopback."""

from __future__ import annotations

from pathlib import Path

from service.cli import main
from service.pipeline.types import RenderOptions
from tests.preview.levels import at_live_level

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


def test_preview_streams_a_file_and_reports_latency(
    live_service: str, real_engine, tmp_path: Path, capsys
) -> None:
    from engines.eval.sync import read_audio

    preview_url = live_service.replace("http", "ws") + "/v1/preview"
    out = tmp_path / "live.wav"
    args = ["preview", str(SAMPLE), "--url", preview_url, "--api-key", "k1", "--speed", "0"]
    assert main([*args, "-o", str(out)]) == 0
    printed = dict(
        line.strip().split(": ", 1) for line in capsys.readouterr().out.splitlines() if ": " in line
    )
    assert int(printed["frames"]) == 150 and int(printed["chunks"]) > 10
    assert float(printed["latency_ms_p99"]) > 0 and int(printed["onsets"]) > 0
    live, rate = read_audio(out)
    off = RenderOptions(format="wav", loudness=None)
    real_engine.render(SAMPLE, tmp_path / "offline.wav", off)
    offline, _ = read_audio(tmp_path / "offline.wav")
    expected, tolerance = at_live_level(real_engine.tier, offline)
    n = min(len(live), len(expected))
    assert rate == 48000 and n > 4 * rate
    assert abs(live[:n] - expected[:n]).max() <= tolerance + 3 / 32768


def test_preview_without_the_key_is_refused(live_service: str, capsys) -> None:
    preview_url = live_service.replace("http", "ws") + "/v1/preview"
    assert main(["preview", str(SAMPLE), "--url", preview_url]) == 1
    assert "unauthorized" in capsys.readouterr().err
