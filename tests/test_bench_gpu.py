"""bench/gpu.py is the script a GPU machine runs: here, with the cuda backend's code on torch's
CPU device, it must run through and print each of its tables (its figures mean nothing here)."""

from __future__ import annotations

import re

import pytest

from bench import gpu

pytestmark = pytest.mark.slow


def test_the_gpu_benchmark_runs_through_on_the_cpu_device(capsys) -> None:
    gpu.main(["--device", "cpu", "--sessions", "1", "2", "--steps", "3", "--seconds", "1"])
    out = capsys.readouterr().out
    assert "## cuda on CPU (torch): preview" in out
    assert re.search(r"agreement with cpu: log-mel distance \d\.\d{4}, onset F1 \d\.\d{3}", out)
    assert "offline 1 s 720p:" in out
    rows = [
        line for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")
    ]
    assert len(rows) == 2 and all("encoder" in row for row in rows)
    assert "largest session count at 30 fps:" in out
