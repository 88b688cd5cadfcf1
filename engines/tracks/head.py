"""The contact head over one object's track, in torch for training: P(contact in the interval)
and when.

It reads the feature rows of service.pipeline.contacts.features (what the service computes live)
and is an MLP (LayerNorm, features -> hidden -> hidden -> 2, GELU; hidden = 256 in the trained
heads, ~92k parameters): a contact logit and the contact's time in the interval in units of its
length, u in (-1, 2) (continuous regression; trained on the interval and its two neighbours, so
a neighbour that fires still times the contact). Events: service.pipeline.contacts.events.pick
on the probabilities, per track, causally. engines.export.contacts writes it as ONNX.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from service.pipeline.contacts.events import Events, pick
from service.pipeline.contacts.features import HeadConfig, track_features


class ContactHead(nn.Module):
    """features [..., F] -> (logit [...], u [...] in (-1, 2): the contact time from the
    interval's start in units of its length)."""

    def __init__(self, config: HeadConfig) -> None:
        super().__init__()
        self.config = config
        self.norm = nn.LayerNorm(config.features)
        self.mlp = nn.Sequential(
            nn.Linear(config.features, config.hidden),
            nn.GELU(),
            nn.Linear(config.hidden, config.hidden),
            nn.GELU(),
            nn.Linear(config.hidden, 2),
        )

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.mlp(self.norm(features))
        if not self.config.wide_u:
            return out[..., 0], torch.sigmoid(out[..., 1])
        # u may leave the interval by up to one interval either way: an interval that fires
        # for a contact just outside it can still say when it was.
        return out[..., 0], 3.0 * torch.sigmoid(out[..., 1]) - 1.0


@dataclass(frozen=True)
class HeadDetector:
    """A trained head run on tracks."""

    head: ContactHead

    @property
    def config(self) -> HeadConfig:
        return self.head.config

    def scores(self, times_s: np.ndarray, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probability, contact time s) per interval (N-1,)."""
        feats = track_features(times_s, pixels, self.config)
        if len(feats) == 0:
            return np.zeros(0), np.zeros(0)
        with torch.no_grad():
            logit, u = self.head(torch.from_numpy(feats))
        t = np.asarray(times_s, np.float64)
        return torch.sigmoid(logit).numpy().astype(np.float64), t[:-1] + u.numpy() * np.diff(t)

    def events(
        self, times_s: np.ndarray, pixels: np.ndarray, threshold: float | None = None
    ) -> Events:
        prob, when = self.scores(times_s, pixels)
        return pick(prob, when, self.config.threshold if threshold is None else threshold)


def save_head(head: ContactHead, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(head.config), "state": head.state_dict()}, path)
    path.with_suffix(".json").write_text(json.dumps(asdict(head.config), indent=1))


def load_head(path: Path) -> ContactHead:
    saved = torch.load(path, map_location="cpu", weights_only=True)
    saved["config"].setdefault("split", False)  # heads from before the split features
    saved["config"].setdefault("wide_u", False)
    head = ContactHead(HeadConfig(**saved["config"]))
    head.load_state_dict(saved["state"])
    return head.eval()
