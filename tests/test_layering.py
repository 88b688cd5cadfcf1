"""Serving on the CPU needs numpy, PyAV and ONNX Runtime: never torch, never the training code."""

from __future__ import annotations

import subprocess
import sys


def test_serving_imports_neither_torch_nor_engines() -> None:
    code = (
        "import sys\n"
        "import service.api.app, service.cli, service.pipeline.engine\n"
        "import service.pipeline.backends.onnxruntime\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'engines'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
