"""The built wheel renders on its own: the tiers are package data, found without
FOLEY_MODELS_DIR; a missing or damaged tier is a configuration error that says where to look."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from service import cli
from service.config import SHIPPED_MODELS_DIR, Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "sample.mp4"


def shipped_tier_files() -> set[str]:
    """Every file a shipped tier's config.json names, and the config itself."""
    files = set()
    for config in SHIPPED_MODELS_DIR.glob("*/config.json"):
        tier = config.parent.name
        stages = json.loads(config.read_text())["stages"]
        files.add(f"service/models/{tier}/config.json")
        files |= {f"service/models/{tier}/{s['file']}" for s in stages.values() if "file" in s}
    return files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = out / "build"
    # A clean checkout's files: an egg-info left by an editable install lists every file, which
    # would hide package data missing from pyproject.toml.
    skip = shutil.ignore_patterns(".*", "*.egg-info", "data", "runs", "build", "dist")
    shutil.copytree(ROOT, build, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(build), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (found,) = out.glob("foley-*.whl")
    return found


def test_the_wheel_holds_every_tier(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = shipped_tier_files()
    assert len(expected) >= 3 * 2
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.endswith(".pt")], "training checkpoints are not shipped"
    assert not [n for n in names if n.startswith("engines/")], "training code is not shipped"


@pytest.mark.slow
def test_the_installed_wheel_renders_the_sample(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOLEY_")}
    env["PYTHONPATH"] = str(site)  # ahead of the source tree's editable install
    out = tmp_path / "sample.foley.wav"
    script = (
        "import sys, service; from service import cli; "
        f"assert service.__file__.startswith({str(site)!r}), service.__file__; "
        "sys.exit(cli.main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "generate", str(SAMPLE), "-o", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 44


def damage(models: Path) -> None:
    """The default tier's graphs replaced by garbage."""
    tier = Settings().default_tier
    shutil.copytree(SHIPPED_MODELS_DIR / tier, models / tier)
    for graph in (models / tier).glob("*.onnx"):
        graph.write_bytes(b"not a graph")


@pytest.mark.parametrize("make", [lambda models: None, damage], ids=["missing", "damaged"])
def test_a_missing_or_damaged_tier_names_the_folder_and_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], make
) -> None:
    make(tmp_path)
    monkeypatch.setenv("FOLEY_MODELS_DIR", str(tmp_path))
    code = cli.main(["generate", str(SAMPLE), "-o", str(tmp_path / "out.wav")])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERNAL
    assert err.startswith("foley: error: model_unavailable: "), err
    assert str(tmp_path) in err and "FOLEY_MODELS_DIR" in err
    assert not (tmp_path / "out.wav").exists()


def test_the_image_pins_every_runtime_dependency() -> None:
    """constraints.txt (what the Dockerfile installs with) names an exact version of each of
    pyproject's dependencies, one the pyproject's own bounds allow."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in map(Requirement, project["dependencies"]):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name]), (requirement, pins[name])
    assert "-c constraints.txt" in (ROOT / "Dockerfile").read_text()
