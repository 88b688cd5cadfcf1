"""`python -m engines.build`: one command from nothing to both shipped tiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines import build
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions
from tests.media import videos


@pytest.mark.slow
def test_build_trains_export_and_prunes_preview_from_it(tmp_path: Path) -> None:
    models = tmp_path / "models"
    build.main(
        [
            *("--clips", "2", "--work", str(tmp_path / "work"), "--out", str(models)),
            *("--vocoder-steps", "2", "--generator-steps", "2", "--prune-steps", "2"),
        ]
    )
    export, preview = (
        json.loads((models / t / "config.json").read_text()) for t in ("export", "preview")
    )
    assert (export["name"], preview["name"]) == ("export", "preview")
    # `preview` is `export` pruned: smaller stages behind the same contract.
    assert preview["parameters"]["encoder"] < export["parameters"]["encoder"] / 2
    assert preview["parameters"]["generator"] < export["parameters"]["generator"]
    assert preview["parameters"]["vocoder"] == export["parameters"]["vocoder"]
    for key in ("video", "audio", "feature_dim"):
        assert preview[key] == export[key]
    for config in (export, preview):  # each stage's GPU precision, measured
        assert set(config["gpu"]["precision"]) == {"encoder", "generator", "vocoder"}
    clip = videos.encode_clip(tmp_path / "in.mp4", fps=25, frames=30, size=(96, 64))
    for tier in ("export", "preview"):
        engine = FoleyEngine.load(Settings(models_dir=models, default_tier=tier))
        result = engine.render(clip.path, tmp_path / f"{tier}.wav", RenderOptions(format="wav"))
        assert result.tier == tier
        assert result.duration_s == clip.end_s - clip.pts_s[0]
