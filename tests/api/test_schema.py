"""The OpenAPI schema is the contract: schemathesis, every check, against a live server with the
shipped tiers and API keys on. Its examples, boundary cases, fuzzing and stateful sequences
(create, read, cancel, delete) must find nothing: no 5xx, no response outside the schema, no
schema-valid request refused and no schema-violating one accepted.

What a schema cannot say is in tests/api/schemathesis_hooks.py (uploads are a real video; each
Idempotency-Key is one request's own); the key comes from tests/api/schemathesis.toml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.api import create_app
from service.config import Settings
from tests.conftest import uvicorn_server
from tests.media import videos

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
KEY = "schema-key"


def test_schemathesis_finds_nothing(real_engine, tmp_path: Path) -> None:
    clip = videos.encode_clip(tmp_path / "clip.mp4", frames=15, size=(64, 48)).path
    settings = Settings(api_keys=[KEY], work_dir=tmp_path / "work")
    app = create_app(settings, engine_loader=lambda *_: real_engine)
    schemathesis = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert schemathesis is not None, "schemathesis is a dev dependency"
    env = {
        **os.environ,
        "FOLEY_SCHEMA_KEY": KEY,
        "FOLEY_SCHEMA_CLIP": str(clip),
        "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks",
        "NO_COLOR": "1",
    }
    with uvicorn_server(app, timeout_s=60) as port:
        run = subprocess.run(
            [
                schemathesis, "--config-file", str(HERE / "schemathesis.toml"), "run",
                f"http://127.0.0.1:{port}/openapi.json", "--checks", "all",
                "--max-examples", "10", "--seed", "1", "--generation-database", ":memory:",
            ],
            env=env, cwd=HERE.parent.parent, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
    assert "passed" in run.stdout and "Stateful" in run.stdout
