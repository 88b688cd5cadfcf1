"""Training smoke run: a few steps on freshly simulated clips, exported, served."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from engines.data.dataset import make_clip, save_clip
from engines.export.onnx_export import export_tier
from engines.models.checkpoint import save_checkpoint
from engines.train import train as cli
from engines.train.loop import train, warm_start
from engines.train.options import TrainOptions
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions
from tests.conftest import tiny_model
from tests.media import videos


def test_train_export_and_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i, kind in enumerate(["drop", "roll"]):
        save_clip(data / f"clip_{i}.npz", make_clip(100 + i, duration_s=2.5, fps=30, kind=kind))
    cfg = dataclasses.replace(tiny_model(), name="smoke")
    # The shipped recipe (seen impacts, their levels, distractors), in a few short steps.
    opts = TrainOptions(
        vocoder_steps=3,
        generator_steps=3,
        vocoder_batch=2,
        generator_batch=2,
        crop_frames=16,
        vocoder_crop_frames=8,
        distractor_p=0.5,
        distractor_pool=2,
    )
    checkpoint = train(data, tmp_path / "run", cfg, opts, val_dir=data)  # validation logs too
    export_tier(checkpoint, tmp_path / "models" / "smoke")

    engine = FoleyEngine.load(Settings(models_dir=tmp_path / "models", default_tier="smoke"))
    clip = videos.encode_clip(tmp_path / "in.mp4", fps=25, frames=30, size=(96, 64))
    result = engine.render(clip.path, tmp_path / "out.wav", RenderOptions(format="wav"))
    assert result.tier == "smoke"
    assert result.duration_s == clip.end_s - clip.pts_s[0]
    assert np.isfinite(list(result.timings.values())).all()


def test_warm_start_with_more_lookahead_starts_where_the_checkpoint_was(tmp_path: Path) -> None:
    """A generator given one more frame of lookahead, warm-started from one without, computes
    what the checkpoint's did until training moves the new taps off zero."""
    short = dataclasses.replace(tiny_model(), generator_lookahead=1)
    encoder, generator, vocoder = short.build()
    checkpoint = save_checkpoint(tmp_path / "short.pt", short, encoder, generator, vocoder)
    _, longer, _ = tiny_model().build()
    warm_start(longer, checkpoint, "generator")
    assert longer.right_context == generator.right_context + 1
    features = torch.randn(1, 12, tiny_model().feature_dim)
    with torch.no_grad():
        now, before = longer.eval().heads(features), generator.eval().heads(features)
    for a, b in zip(now, before, strict=True):
        torch.testing.assert_close(a, b)


def test_the_default_options_are_the_shipped_recipe() -> None:
    """docs/model-card.md: `--seen-impacts --level-weight 0.2 --distractors 0.1`; engines.build
    trains with the same."""
    from engines import build

    opts = TrainOptions()
    assert (opts.seen_impacts, opts.level_weight, opts.distractor_p) == (True, 0.2, 0.1)
    assert build._recipe(opts.vocoder_steps, opts.generator_steps, opts.lr, opts.seed) == opts


def test_the_cli_trains_the_recipe_and_takes_its_old_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m engines.train.train` with no options trains TrainOptions(); the recipe's flags
    as the model card writes them still parse, and each option can be turned off."""
    runs: list[TrainOptions] = []
    monkeypatch.setattr(cli, "train", lambda data, out, cfg, opts, *rest: runs.append(opts))
    cli.main(["--data", str(tmp_path)])
    cli.main(["--seen-impacts", "--level-weight", "0.2", "--distractors", "0.1", "--lr", "5e-4"])
    cli.main(["--no-seen-impacts", "--level-weight", "0", "--distractors", "0"])
    assert runs[0] == TrainOptions()
    assert runs[1] == dataclasses.replace(TrainOptions(), lr=5e-4)
    assert (runs[2].seen_impacts, runs[2].level_weight, runs[2].distractor_p) == (False, 0, 0)
    for removed in ("--motion-weight", "--keypoint-weight", "--encoder-glimpses"):
        with pytest.raises(SystemExit):
            cli.main([removed, "1"])
