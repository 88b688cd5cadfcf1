"""Serving on the CPU needs numpy, PyAV, OpenCV and ONNX Runtime: never torch or scipy (training's
libraries, not the wheel's dependencies), never the training code; and the service's packages
import one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


def test_serving_imports_neither_training_libraries_nor_engines() -> None:
    code = (
        "import sys\n"
        "import service.api.app, service.cli, service.pipeline.engine\n"
        "import service.pipeline.backends.onnxruntime, service.pipeline.tier\n"
        "import service.pipeline.motion.synth, service.pipeline.runner\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'scipy', 'engines'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# Which service packages each may import (besides config, errors, context): one way, from the
# transports down to media. A module that imports against it belongs elsewhere.
MAY_IMPORT = {
    "media": set(),
    "cache": set(),
    "pipeline": {"media", "cache"},
    "markers": {"pipeline"},
    "preview": {"media", "pipeline", "markers"},
    "jobs": {"media", "pipeline", "cache", "markers"},
    "api": {"media", "pipeline", "cache", "markers", "preview", "jobs"},
    "cli": {"media", "pipeline", "markers", "preview", "jobs", "api"},
}
SHARED = {"config", "errors", "context"}


def test_packages_import_one_way() -> None:
    service = Path(__file__).resolve().parents[1] / "service"
    wrong = []
    for package, allowed in MAY_IMPORT.items():
        files = [service / f"{package}.py"] if (service / f"{package}.py").exists() else []
        for path in files or sorted((service / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    parts = [*name.split("."), ""]
                    if parts[0] == "service" and parts[1] not in {package, ""} | allowed | SHARED:
                        wrong.append(f"{path.relative_to(service.parent)} imports {name}")
    assert wrong == []


def test_the_backends_know_the_stage_contract_and_nothing_else_of_the_pipeline() -> None:
    """A backend runs graphs a tier's contract describes: what the stages mean is not its
    business, so a new backend needs nothing but the contract."""
    backends = Path(__file__).resolve().parents[1] / "service" / "pipeline" / "backends"
    allowed = {"service.pipeline.contract"}
    wrong = []
    for path in sorted(backends.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                own = name.startswith("service.pipeline.backends") or name in allowed
                if name.startswith("service.pipeline.") and not own:
                    wrong.append(f"{path.name} imports {name}")
    assert wrong == []


def test_service_tests_import_no_training_code_at_module_level() -> None:
    """The service's tests collect with the service alone installed; a test that needs the
    simulator or torch imports it where it runs (tests/engines test the engines)."""
    tests = Path(__file__).resolve().parent
    wrong = []
    for path in sorted(tests.rglob("*.py")):
        if tests / "engines" in path.parents:
            continue
        for node in ast.parse(path.read_text()).body:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(name.split(".")[0] in {"torch", "engines"} for name in names):
                wrong.append(f"{path.relative_to(tests)}: {ast.unparse(node)}")
    assert wrong == []
