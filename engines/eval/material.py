"""Is the material recognisable? A small classifier learns an impact's object material from the
ground-truth sound of isolated impacts, then judges the generated sound at the same impacts.

Features, from the log-mel frames of the FEATURE_S after the onset: each band's mean relative
to the loudest band's (the spectrum's shape; the level carries the impulse, not the material)
and each band's decay per frame (how fast it rings down). The classifier is a one-hidden-layer
network (torch), small and quick, and blind to anything but the spectrum's shape and decay.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from engines.audio.render import synthesize
from engines.eval.reference import contact_starts
from engines.models.mel import LogMel
from engines.sim import GROUND, SimClip, scene_from_seed
from engines.sim.materials import OBJECT_MATERIALS
from engines.sim.simulate import simulate_unfilmed

FEATURE_S = 0.08
ISOLATION_S = 0.12
HIDDEN = 64
SAME_EVENT_S = 0.02  # no other contact this close before the impact or within FEATURE_S after


def isolated_impacts(clip: SimClip) -> list[tuple[float, int]]:
    """(time, object material index) of impacts with the floor that no other contact masks."""
    starts = contact_starts(clip)
    out = []
    for impact in clip.impacts:
        if impact.other_id != GROUND:
            continue  # object on object: two materials at once
        t = impact.time_s
        # A slide or roll that starts with the impact is part of it, not another contact.
        others = starts[(starts < t - 1e-4) | (starts > t + SAME_EVENT_S)]
        if np.any((others > t - ISOLATION_S) & (others < t + FEATURE_S)):
            continue
        out.append((t, OBJECT_MATERIALS.index(impact.material)))
    return out


def event_features(
    audio: np.ndarray, times_s: np.ndarray, mel: LogMel, sample_rate: int
) -> np.ndarray:
    """(N, 2 * n_mels) features of the events starting at `times_s`."""
    frames = max(1, round(FEATURE_S * sample_rate / mel.hop))
    with torch.no_grad():
        spec = mel(torch.from_numpy(np.ascontiguousarray(audio, np.float32))[None])[0].numpy()
    rows = []
    for t in np.asarray(times_s, float):
        first = int(t * sample_rate) // mel.hop
        window = spec[first : first + frames]
        if len(window) < frames:
            window = np.pad(window, ((0, frames - len(window)), (0, 0)), mode="edge")
        shape = window.mean(axis=0)
        decay = np.polyfit(np.arange(frames), window, 1)[0] if frames > 1 else np.zeros_like(shape)
        rows.append(np.concatenate([shape - shape.max(), decay]))
    return np.asarray(rows, np.float32).reshape(len(rows), -1)


@dataclass
class MaterialClassifier:
    """A one-hidden-layer network over standardised features."""

    net: torch.nn.Module
    mean: torch.Tensor
    std: torch.Tensor

    @classmethod
    def fit(
        cls, x: np.ndarray, y: np.ndarray, *, steps: int = 1500, seed: int = 0
    ) -> MaterialClassifier:
        torch.manual_seed(seed)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
        mean, std = xt.mean(0), xt.std(0) + 1e-3
        xt = (xt - mean) / std
        net = torch.nn.Sequential(
            torch.nn.Linear(x.shape[1], HIDDEN),
            torch.nn.GELU(),
            torch.nn.Dropout(0.2),
            torch.nn.Linear(HIDDEN, len(OBJECT_MATERIALS)),
        )
        optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
        # Bouncy materials give more impacts: weigh each material's events equally.
        counts = torch.bincount(yt, minlength=len(OBJECT_MATERIALS)).float()
        balance = counts.sum() / (len(counts) * counts.clamp(min=1))
        for _ in range(steps):
            optimizer.zero_grad()
            F.cross_entropy(net(xt), yt, weight=balance).backward()
            optimizer.step()
        return cls(net.eval(), mean, std)

    def predict(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.net((torch.from_numpy(x) - self.mean) / self.std).argmax(1).numpy()


def training_set(
    n_clips: int,
    seed: int,
    mel: LogMel,
    *,
    holdout: bool = False,
    duration_s: float = 4.0,
    sample_rate: int = 48000,
) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the isolated impacts in `n_clips` drop scenes (sound only: no
    camera), of the held-out distribution's shapes and sizes if `holdout`."""
    xs, ys = [], []
    for i in range(n_clips):
        spec = scene_from_seed(seed + i, kind="drop", holdout=holdout)
        clip = simulate_unfilmed(spec, duration_s=duration_s)
        events = isolated_impacts(clip)
        if not events:
            continue
        audio = synthesize(clip, sample_rate=sample_rate, seed=seed + i)
        times = np.asarray([t for t, _ in events])
        xs.append(event_features(audio, times, mel, sample_rate))
        ys.append(np.asarray([m for _, m in events]))
    return np.concatenate(xs), np.concatenate(ys)
