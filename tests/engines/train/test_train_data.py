"""Training targets: onset frames and the impacts' own levels, against the simulated truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from engines.data.dataset import make_clip, save_clip
from engines.models.config import ModelConfig
from engines.train.data import SEEN_IMPULSE_NS, load_clip, log_mel


def test_every_strong_impact_is_an_onset_target_with_the_level_of_its_own_sound(
    tmp_path: Path,
) -> None:
    record = make_clip(2, duration_s=1.0, fps=30, kind="drop")
    assert len(record.impacts) >= 2
    save_clip(tmp_path / "clip.npz", record)
    cfg = ModelConfig()
    clip = load_clip(tmp_path / "clip.npz", cfg, log_mel(cfg), seen_impacts=True, levels=True)
    assert clip.impact_level is not None

    frames = np.floor(record.impacts["time_s"] * cfg.sample_rate / cfg.hop).astype(int)
    strong = frames[record.impacts["impulse_ns"] >= SEEN_IMPULSE_NS]
    assert (clip.onset.numpy()[strong] == 1.0).all()  # heard or not

    has_level = ~torch.isnan(clip.impact_level[:, 0])
    # exactly the frames where impacts start (ceil of the start sample may tip into the next)
    starts = np.ceil(record.impacts["time_s"] * cfg.sample_rate).astype(int) // cfg.hop
    assert set(np.flatnonzero(has_level.numpy())) == set(starts.tolist())
    assert torch.isfinite(clip.impact_level[has_level]).all()
    # Nothing rings before the first impact: its level is the track's own there.
    first = int(starts[0])
    expected = torch.maximum(clip.mel[first], clip.mel[first + 1])
    audible = expected > -9.0
    assert audible.sum() > 10
    assert torch.allclose(clip.impact_level[first][audible], expected[audible], atol=0.05)
    # Later ones are heard without the ringing before them: quieter than the track in all (up
    # to the odd band where the ringing cancelled some of the new sound).
    later = [int(m) for m in starts[1:]]
    track = torch.maximum(clip.mel[later], clip.mel[[m + 1 for m in later]])
    power = torch.exp(clip.impact_level[later]).sum(dim=1)
    assert (power <= torch.exp(track).sum(dim=1) * 1.05).all()
    assert (clip.impact_level[later] < track - 0.5).any()


def test_by_default_the_onset_targets_are_the_heard_contacts(tmp_path: Path) -> None:
    save_clip(tmp_path / "clip.npz", make_clip(2, duration_s=1.0, fps=30, kind="drop"))
    cfg = ModelConfig()
    clip = load_clip(tmp_path / "clip.npz", cfg, log_mel(cfg))
    assert clip.impact_level is None
    assert len(clip.heard) > 0
    frames = np.floor(clip.heard * cfg.sample_rate / cfg.hop).astype(int)
    assert set(np.flatnonzero(clip.onset.numpy())) == set(frames.tolist())
