"""What the contact head reads of one track: per frame interval, a fixed-length feature row.

For interval k = (t_k, t_k+1] the row reads frames k-CONTEXT+1 .. k+1+lookahead of the track (and
a running noise level from the frames before), never anything later, so the head can run live,
one interval behind the newest frame plus `lookahead` frames:

- the interval's length, and its neighbours' relative to it (variable frame rates);
- per interval of the window, the velocity (px per frame of interval k) and its change from
  the interval before, in a signed log so 0.1 px and 30 px both stay readable;
- the constant-acceleration arc fits of service.pipeline.contacts.geometry over 3, 4, 6 and 8
  frames before the interval (velocity jump, fitted contact time, fit residual, extrapolation
  residuals): the sub-frame timing is geometry, which a small MLP would only approximate;
- (`split`) the same arc over the whole window, but allowed to break at one earlier frame:
  a bounce two frames after the previous one;
- which window frames were detected;
- the track's noise level: median |third difference| of positions over the last NOISE_FRAMES.

The head itself (a small MLP: contact logit, contact time u in the interval's units) is trained
by engines.tracks and shipped as an ONNX graph in the tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from service.pipeline.contacts.geometry import (
    NOISE_FRAMES,
    NOISE_PER_SIGMA,
    fit_arcs,
    fit_split_arcs,
    masked,
    noise_level,
    stacked,
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
    out: np.ndarray = np.sign(x) * np.log1p(np.abs(x) / scale)
    return out


def track_features(
    times_s: np.ndarray, pixels: np.ndarray, config: HeadConfig, rows: np.ndarray | None = None
) -> np.ndarray:
    """One track: times (N,) s, pixels (N, 2) model px (NaN = not detected) -> features
    (N-1, config.features) float32 (or of the intervals `rows` only), row k from frames
    <= k+1+lookahead only."""
    return tracks_features([(times_s, pixels, rows)], config)


def tracks_features(
    tracks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]], config: HeadConfig
) -> np.ndarray:
    """`track_features` of several tracks' (times, pixels, rows), one after another, with the
    numpy work done once for all of them (a live stream's tracks at one frame)."""
    la, ctx = config.lookahead, config.context
    tracks = [t for t in tracks if len(t[0]) >= 2]
    if not tracks:
        return np.zeros((0, config.features), np.float32)
    w = stacked([windows(times, pixels, ctx, la, rows) for times, pixels, rows in tracks])
    noise = np.concatenate([noise_level(times, pixels, la, rows) for times, pixels, rows in tracks])
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
    # The arcs over 3, 4, 6 and 8 frames in one call: windows masked to each length, stacked.
    fits = fit_arcs(stacked([masked(w, frames) for frames in ARC_FRAMES]))
    for i in range(len(ARC_FRAMES)):
        rows_i = slice(i * k, (i + 1) * k)
        parts += [
            slog(fits.change[rows_i])[:, None],
            np.clip(fits.u_raw[rows_i], -1.0, 2.0)[:, None],
            slog(fits.residual[rows_i], 0.1)[:, None],
            fits.ok[rows_i, None].astype(np.float64),
            slog(fits.e[rows_i]).reshape(k, -1),
        ]
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


def history(config: HeadConfig) -> int:
    """Frames a live caller must keep per track: what the newest decidable interval reads."""
    return max(config.context, NOISE_FRAMES) + config.lookahead + 2
