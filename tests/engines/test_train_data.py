"""Training targets: onset frames, the impacts' own levels and their materials, against the
simulated truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from engines.data.dataset import make_clip, save_clip
from engines.models.config import ModelConfig
from engines.sim.materials import MATERIALS
from engines.train.data import DECAY_FRAMES, SEEN_IMPULSE_NS, load_clip, log_mel
from engines.train.material import NO_IMPACT, material_accuracy, material_loss


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
    # Each group's own ringing, from the frame it starts on: it rings down.
    assert clip.decay_at is not None and clip.decay is not None
    assert clip.decay_at.tolist() == sorted(set(starts.tolist()))
    assert clip.decay.shape == (len(clip.decay_at), DECAY_FRAMES, cfg.n_mels)
    loud = clip.decay[0, :2].amax(dim=0) > -6.0
    assert loud.sum() > 10
    assert (clip.decay[0, -1, loud] < clip.decay[0, :2, loud].amax(dim=0)).all()


def test_by_default_the_onset_targets_are_the_heard_contacts(tmp_path: Path) -> None:
    save_clip(tmp_path / "clip.npz", make_clip(2, duration_s=1.0, fps=30, kind="drop"))
    cfg = ModelConfig()
    clip = load_clip(tmp_path / "clip.npz", cfg, log_mel(cfg))
    assert clip.impact_level is None
    assert len(clip.heard) > 0
    frames = np.floor(clip.heard * cfg.sample_rate / cfg.hop).astype(int)
    assert set(np.flatnonzero(clip.onset.numpy())) == set(frames.tolist())


def test_the_material_targets_name_what_meets_at_each_strong_impact(tmp_path: Path) -> None:
    record = make_clip(2, duration_s=1.0, fps=30, kind="drop")
    save_clip(tmp_path / "clip.npz", record)
    cfg = ModelConfig()
    clip = load_clip(tmp_path / "clip.npz", cfg, log_mel(cfg))
    assert clip.material is not None
    assert clip.material.shape == (len(clip.rgb), 2)
    strong = record.impacts[record.impacts["impulse_ns"] >= SEEN_IMPULSE_NS]
    assert len(strong) >= 2
    frames = np.floor(strong["time_s"] * cfg.fps).astype(int)
    labelled = np.flatnonzero(clip.material[:, 0].numpy() != NO_IMPACT)
    assert set(labelled.tolist()) == set(frames.tolist())
    # A drop on the floor: the object's material first, the surface's second.
    first = int(np.argmax(strong["impulse_ns"] * (frames == frames[0])))
    assert clip.material[frames[0]].tolist() == [
        int(strong["material"][first]),
        int(strong["other_material"][first]),
    ]
    surfaces = {m.id for m in MATERIALS if m.surface}
    assert set(clip.material[labelled, 1].tolist()) <= surfaces  # one object: it hits the floor


def test_material_loss_and_accuracy_on_known_answers() -> None:
    target = torch.full((1, 4, 2), NO_IMPACT)
    target[0, 1] = torch.tensor([2, 9])
    target[0, 3] = torch.tensor([0, 9])
    logits = torch.zeros(1, 4, 2, 12)
    assert torch.isclose(material_loss(logits, target), torch.tensor(np.log(12.0)).float())
    logits[0, 1, 0, 2] = logits[0, 3, 1, 9] = logits[0, 1, 1, 9] = 50.0
    logits[0, 3, 0, 5] = 50.0  # wrong: the object there is material 0
    logits[0, 0, 0, 7] = 50.0  # no impact in frame 0: not counted
    assert material_accuracy(logits, target) == (0.5, 1.0, 2)
    assert material_loss(logits[:, :1], target[:, :1]) == 0.0
