"""A tiny learned contact head over one object's track: P(contact in the interval) and when.

For interval k = (t_k, t_k+1] it reads frames k-CONTEXT+1 .. k+1+lookahead of the track (and
a running noise level from the frames before), never anything later: it can run live, one
interval behind the newest frame plus `lookahead` frames. Features (`track_features`):

- the interval's length, and its neighbours' relative to it (variable frame rates);
- per interval of the window, the velocity (px per frame of interval k) and its change from
  the interval before, in a signed log so 0.1 px and 30 px both stay readable;
- the constant-acceleration arc fits of engines.tracks.geometry over 3, 4, 6 and 8 frames
  before the interval (velocity jump, fitted contact time, fit residual, extrapolation
  residuals): the sub-frame timing is geometry, which a small MLP would only approximate;
- (`split`) the same arc over the whole window, but allowed to break at one earlier frame
  (engines.tracks.geometry.fit_split_arcs): a bounce two frames after the previous one;
- which window frames were detected;
- the track's noise level: median |third difference| of positions over the last NOISE_FRAMES.

The head is an MLP (LayerNorm, features -> hidden -> hidden -> 2, GELU; hidden = 256 in the
trained heads, ~92k parameters): a contact logit and the contact's time in the
interval in units of its length, u in (-1, 2) (continuous regression; trained on the interval
and its two neighbours, so a neighbour that fires still times the contact). Events:
`engines.tracks.events.pick` on the probabilities, per track, causally.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy.special import erf
from torch import nn

from engines.tracks.events import Events, pick
from engines.tracks.geometry import (
    NOISE_FRAMES,
    NOISE_PER_SIGMA,
    fit_arcs,
    fit_split_arcs,
    narrowed,
    noise_level,
    windows,
)

FEATURE_VERSION = 2  # bump when track_features changes: cached training rounds depend on it
CONTEXT = 8  # frames up to and including frame k
ARC_FRAMES: tuple[int, ...] = (3, 4, 6, 8)
PX = 0.25  # signed-log scale: differences well below this are noise-level


@dataclass(frozen=True)
class HeadConfig:
    lookahead: int = 1
    context: int = CONTEXT
    hidden: int = 256
    threshold: float = 0.5  # probability at which an interval fires (set on validation)
    split: bool = True  # the split-arc features
    wide_u: bool = True  # u in (-1, 2) rather than (0, 1)

    @property
    def features(self) -> int:
        w = self.context + 1 + self.lookahead  # frames in the window
        arc = 4 + 2 * (self.lookahead + 1)
        return 1 + 5 * (w - 1) + (len(ARC_FRAMES) + self.split) * arc + 2 * self.split + w + 1


def slog(x: np.ndarray, scale: float = PX) -> np.ndarray:
    """Signed log: linear below `scale`, logarithmic above."""
    return np.sign(x) * np.log1p(np.abs(x) / scale)


def track_features(
    times_s: np.ndarray, pixels: np.ndarray, config: HeadConfig, rows: np.ndarray | None = None
) -> np.ndarray:
    """One track: times (N,) s, pixels (N, 2) model px (NaN = not detected) -> features
    (N-1, config.features) float32 (or of the intervals `rows` only), row k from frames
    <= k+1+lookahead only."""
    la, ctx = config.lookahead, config.context
    n = len(times_s)
    if n < 2:
        return np.zeros((0, config.features), np.float32)
    w = windows(times_s, pixels, ctx, la, rows)  # (K, W)
    k = len(w.dt)
    # Interval lengths of the window relative to interval k's.
    dt_w = np.diff(w.s, axis=1)  # (K, W-1) in units of dt_k
    both = w.valid[:, 1:] & w.valid[:, :-1]
    vel = np.where(both[..., None], np.diff(w.xy, axis=1) / dt_w[..., None], 0.0)  # px/frame_k
    dvel = np.zeros_like(vel)
    dvel[:, 1:] = np.where((both[:, 1:] & both[:, :-1])[..., None], vel[:, 1:] - vel[:, :-1], 0.0)
    parts = [
        np.log(w.dt * 30.0)[:, None],
        np.log(np.clip(dt_w, 0.05, 20.0)),
        slog(vel).reshape(k, -1),
        slog(dvel).reshape(k, -1),
    ]
    for frames in ARC_FRAMES:
        fit = fit_arcs(narrowed(w, frames))
        parts += [
            slog(fit.change)[:, None],
            np.clip(fit.u_raw, -1.0, 2.0)[:, None],
            slog(fit.residual, 0.1)[:, None],
            fit.ok[:, None].astype(np.float64),
            slog(fit.e).reshape(k, -1),
        ]
    noise = noise_level(times_s, pixels, la, rows)
    if config.split:
        split = fit_split_arcs(w, noise / NOISE_PER_SIGMA)
        fit = split.fit
        parts += [
            slog(fit.change)[:, None],
            np.clip(fit.u_raw, -1.0, 2.0)[:, None],
            slog(fit.residual, 0.1)[:, None],
            fit.ok[:, None].astype(np.float64),
            slog(fit.e).reshape(k, -1),
            (split.split / ctx)[:, None],
            slog(np.sqrt(split.rss_whole), 0.1)[:, None],
        ]
    parts += [w.valid.astype(np.float64), slog(noise, 0.1)[:, None]]
    out = np.concatenate(parts, axis=1).astype(np.float32)
    return out


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


@dataclass
class HeadDetector:
    """A trained head run on tracks."""

    head: ContactHead
    _weights: dict[str, np.ndarray] | None = field(default=None, repr=False)

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

    @property
    def history(self) -> int:
        """Frames a live caller must keep: what the newest decidable interval reads."""
        return max(self.config.context, NOISE_FRAMES) + self.config.lookahead + 2

    def latest(self, times_s: np.ndarray, pixels: np.ndarray) -> tuple[float, float]:
        """Live use, once per new frame: (probability, contact time s) of the newest interval
        the lookahead allows, k = N - 2 - lookahead, from the last `history` frames only
        (the same numbers `scores` gives for it, to float32 rounding; numpy alone: a torch
        call costs more than the whole head). (0, nan) while there is none."""
        n = len(times_s)
        k = n - 2 - self.config.lookahead
        if k < 0:
            return 0.0, float("nan")
        lo = max(0, n - self.history)
        t, px = times_s[lo:], pixels[lo:]
        row = np.array([k - lo])
        logit, u = self._numpy_head(track_features(t, px, self.config, row))
        dt = t[k - lo + 1] - t[k - lo]
        return float(1.0 / (1.0 + np.exp(-logit[0]))), float(t[k - lo] + u[0] * dt)

    def _numpy_head(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """ContactHead.forward in numpy."""
        if self._weights is None:
            self._weights = {k: v.detach().numpy() for k, v in self.head.state_dict().items()}
        p = self._weights
        x = features.astype(np.float32)
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        x = (x - mean) / np.sqrt(var + self.head.norm.eps) * p["norm.weight"] + p["norm.bias"]
        for i in (0, 2):
            x = x @ p[f"mlp.{i}.weight"].T + p[f"mlp.{i}.bias"]
            x = 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))  # exact GELU, as nn.GELU()
        out = x @ p["mlp.4.weight"].T + p["mlp.4.bias"]
        z = out[:, 1]
        if not self.config.wide_u:
            return out[:, 0], 1.0 / (1.0 + np.exp(-z))
        return out[:, 0], 3.0 / (1.0 + np.exp(-z)) - 1.0


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
