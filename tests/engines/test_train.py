"""Training smoke run: a few steps on freshly simulated clips, exported, served."""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from engines.data.dataset import make_clip, save_clip
from engines.export.onnx_export import export_tier
from engines.models.checkpoint import load_checkpoint, save_checkpoint
from engines.sim.materials import MATERIAL_NAMES
from engines.train import locator
from engines.train.data import load_clips
from engines.train.train import TrainOptions, _warm_start, train
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions
from tests.conftest import TINY_MODEL
from tests.media import videos


@pytest.mark.parametrize("encoder_materials", [0, len(MATERIAL_NAMES)])
def test_train_export_and_serve(tmp_path: Path, encoder_materials: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i, kind in enumerate(["drop", "roll"]):
        save_clip(data / f"clip_{i}.npz", make_clip(100 + i, duration_s=2.5, fps=30, kind=kind))
    # Glimpses and keypoints, exported too; the materials trained on the trunk, or named by
    # the glimpses.
    cfg = dataclasses.replace(
        TINY_MODEL,
        name="smoke",
        encoder_glimpses=2,
        encoder_materials=encoder_materials,
        encoder_keypoints=3,
    )
    opts = TrainOptions(
        vocoder_steps=3,
        generator_steps=3,
        vocoder_batch=2,
        generator_batch=2,
        crop_frames=16,
        vocoder_crop_frames=8,
        motion_weight=1.0,  # the optional dense motion targets run too
        seen_impacts=True,  # and the impacts' level targets
        level_weight=0.2,
        decay_weight=0.2,  # and their decays
        material_weight=0.3,  # and the material targets
        keypoint_weight=0.05,  # and the keypoints'
        distractor_p=0.5,  # and the procedural scenes where nothing sounds
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
    short = dataclasses.replace(TINY_MODEL, generator_lookahead=1)
    encoder, generator, vocoder = short.build()
    checkpoint = save_checkpoint(tmp_path / "short.pt", short, encoder, generator, vocoder)
    _, longer, _ = TINY_MODEL.build()
    _warm_start(longer, checkpoint, "generator")
    assert longer.right_context == generator.right_context + 1
    features = torch.randn(1, 12, TINY_MODEL.feature_dim)
    with torch.no_grad():
        now, before = longer.eval().heads(features), generator.eval().heads(features)
    for a, b in zip(now, before, strict=True):
        torch.testing.assert_close(a, b)


def test_decay_loss_is_zero_for_the_decay_the_events_ring_with() -> None:
    """Events whose decay mixture is all on one T60 ring down as exp(-rate * k); a target that
    rings so scores 0, one that rings otherwise does not."""
    from engines.models.generator import DECAY_T60_S
    from engines.train.data import DECAY_FRAMES
    from engines.train.train import decay_loss

    _, generator, _ = TINY_MODEL.build()
    n_mels, decays = TINY_MODEL.n_mels, len(DECAY_T60_S)
    with torch.no_grad():
        generator.event_decay.weight.zero_()
        bias = torch.full((n_mels, decays), -30.0)
        bias[:, 3] = 0.0  # all on the fourth decay
        generator.event_decay.bias.copy_(bias.reshape(-1))
    r, n = TINY_MODEL.mels_per_frame, 4
    x = torch.randn(1, generator.mel_dim, n * r)
    rate = math.log(1e6) / (DECAY_T60_S[3] * TINY_MODEL.sample_rate / TINY_MODEL.hop)
    rings = -rate * torch.arange(DECAY_FRAMES, dtype=torch.float32)
    clip = types.SimpleNamespace(
        decay_at=torch.tensor([5]),
        decay=(rings[:, None] - 2.0).expand(DECAY_FRAMES, n_mels)[None].clone(),
    )
    silent = torch.zeros(1, dtype=torch.bool)
    loss = decay_loss(generator, x, [(clip, 0)], silent, r, n, TINY_MODEL.log_floor)
    assert float(loss) < 1e-4
    clip.decay = (3 * rings[:, None] - 2.0).expand(DECAY_FRAMES, n_mels)[None].clone()
    assert float(decay_loss(generator, x, [(clip, 0)], silent, r, n, TINY_MODEL.log_floor)) > 0.1
    assert float(decay_loss(generator, x, [(clip, 0)], ~silent, r, n, TINY_MODEL.log_floor)) == 0


def test_locator_trains_alone_and_leaves_the_features_as_they_were(tmp_path: Path) -> None:
    """`engines.train.locator` adds keypoints to a checkpoint's encoder and trains only their
    locator: the keypoints move, and the features stay what the checkpoint computed."""
    data = tmp_path / "data"
    data.mkdir()
    save_clip(data / "clip_0.npz", make_clip(7, duration_s=1.5, fps=30, kind="drop"))
    start = dataclasses.replace(TINY_MODEL, height=96, width=96)
    encoder, generator, vocoder = start.build()
    checkpoint = save_checkpoint(tmp_path / "start.pt", start, encoder, generator, vocoder)
    out = tmp_path / "located.pt"
    locator.main(
        [str(checkpoint), str(out), "--data", str(data), "--val", str(data), "--steps", "3"]
    )
    cfg, located, _, _ = load_checkpoint(out)
    assert cfg.encoder_keypoints == 3
    frames, age = torch.rand(1, 6, 3, 96, 96), torch.zeros(1, 6)
    with torch.no_grad():
        torch.testing.assert_close(located(frames, age), encoder.eval()(frames, age))
    # Trained further, only the locator moves.
    before = {k: v.clone() for k, v in located.state_dict().items()}
    clips = load_clips(data, cfg)
    locator.train_locator(located, clips, steps=3, batch=2, frames=4)
    moved = {k for k, v in located.state_dict().items() if not torch.equal(v, before[k])}
    assert moved and all(k.startswith("locate.") for k in moved)
