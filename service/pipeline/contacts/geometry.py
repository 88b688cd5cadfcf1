"""Where inside a frame interval an object's motion changed: constant-acceleration arcs.

A contact leaves an object's centre where it was and changes its velocity at once; gravity,
perspective and a moving camera only bend the path smoothly. For interval k = (t_k, t_k+1]:

1. fit an arc (constant acceleration, weighted least squares) to the `before` frames up to
   and including frame k;
2. extrapolate it to the frames after: k+1 .. k+1+lookahead. Their residuals e_j are what the
   arc does not explain; if the contact at time t_c changed the velocity by D (and left the
   acceleration alone), e_j = D (t_j - t_c), a line in time through zero at t_c;
3. fit that line: its slope is the velocity jump D, its zero the contact time. Needs two frames
   after the interval's start, so one frame of lookahead at least.

Times inside a window are in units of the interval's own length (s = (t - t_k) / (t_k+1 - t_k)),
so D comes out in pixels per frame of that interval, the unit a visibility threshold is in.
`fit_split_arcs` lets the window before the interval break at one earlier frame (a bounce two
frames after the previous one). The contact head (service.pipeline.contacts.features) reads
these fits; they are its sub-frame timing.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

BEFORE = 6  # frames k-5 .. k
LOOKAHEAD = 1  # frames past the interval's end
NOISE_FRAMES = 30
NOISE_PER_SIGMA = 4.9  # noise_level / position noise std on smooth arcs (measured)


@dataclass(frozen=True)
class Windows:
    """Every interval's frames from k-before+1 to k+1+lookahead of one or more tracks.

    s: (K, W) times relative to t_k in units of the interval (s = 0 at t_k, 1 at t_k+1);
    xy: (K, W, 2) pixels relative to frame k's (0 where missing); valid: (K, W) bool;
    dt: (K,) interval lengths, s; t0: (K,) t_k, s. W = before + 1 + lookahead; column
    before - 1 is frame k.
    """

    s: np.ndarray
    xy: np.ndarray
    valid: np.ndarray
    dt: np.ndarray
    t0: np.ndarray
    before: int
    lookahead: int


def windows(
    times_s: np.ndarray,
    pixels: np.ndarray,
    before: int = BEFORE,
    lookahead: int = LOOKAHEAD,
    rows: np.ndarray | None = None,
) -> Windows:
    """The windows of one track: times (N,), pixels (N, 2) with NaN = not detected ->
    Windows of K = N - 1 intervals (or of the intervals `rows` only). Frames outside the track
    are missing. Nothing after frame k+1+lookahead is read (causality)."""
    n = len(times_s)
    k = np.arange(n - 1) if rows is None else np.asarray(rows)
    offsets = np.arange(-before + 1, lookahead + 2)
    idx = k[:, None] + offsets[None, :]
    inside = (idx >= 0) & (idx < n)
    idx_c = np.clip(idx, 0, n - 1)
    t = np.asarray(times_s, np.float64)
    dt = t[k + 1] - t[k]
    s = (t[idx_c] - t[k][:, None]) / dt[:, None]
    # Missing frames outside the track keep a regular spacing so no weight-0 row is degenerate.
    s = np.where(inside, s, offsets[None, :].astype(np.float64))
    xy = pixels[idx_c].astype(np.float64)
    valid = inside & np.isfinite(xy).all(axis=-1)
    anchor = pixels[k].astype(np.float64)
    xy = np.where(valid[..., None], xy - anchor[:, None, :], 0.0)
    valid &= np.isfinite(anchor).all(axis=-1, keepdims=True)
    xy = np.where(valid[..., None], xy, 0.0)
    return Windows(s, xy, valid, dt, t[k], before, lookahead)


def masked(w: Windows, before: int) -> Windows:
    """The same windows with only the last `before` frames before the interval counted: what
    `fit_arcs` makes of it equals what it makes of `narrowed(w, before)`, but windows masked to
    different lengths can be fitted in one call (`np.concatenate` their fields)."""
    if not 1 <= before <= w.before:
        raise ValueError(f"cannot mask {w.before} frames to {before}")
    keep = np.arange(w.s.shape[1]) >= w.before - before
    valid = w.valid & keep[None, :]
    return Windows(
        w.s, np.where(valid[..., None], w.xy, 0.0), valid, w.dt, w.t0, w.before, w.lookahead
    )


def stacked(parts: list[Windows]) -> Windows:
    """Windows of the same shape, one after another (K summed)."""
    first = parts[0]
    s, xy, valid, dt, t0 = (
        np.concatenate([getattr(p, f) for p in parts]) for f in ("s", "xy", "valid", "dt", "t0")
    )
    return Windows(s, xy, valid, dt, t0, first.before, first.lookahead)


def narrowed(w: Windows, before: int) -> Windows:
    """The same windows with only the last `before` frames before the interval: equal to
    `windows(..., before, ...)` of the same track, without recomputing them."""
    if not 1 <= before <= w.before:
        raise ValueError(f"cannot narrow {w.before} frames to {before}")
    cut = w.before - before
    return Windows(w.s[:, cut:], w.xy[:, cut:], w.valid[:, cut:], w.dt, w.t0, before, w.lookahead)


@dataclass(frozen=True)
class ArcFit:
    """Per interval (K,): the velocity jump `jump` (K, 2) px per frame of the interval and its
    size `change`; the contact time `u` in the interval's units, in [0, 1]; `residual`: RMS px
    of the arc before (noise and earlier contacts); `speed`: px per frame at t_k by that arc;
    `accel`: (K, 2) its acceleration, px per frame^2; `e`: (K, lookahead+1, 2) residuals of the
    frames after; `ok`: enough frames to say anything."""

    jump: np.ndarray
    change: np.ndarray
    u: np.ndarray
    u_raw: np.ndarray
    residual: np.ndarray
    speed: np.ndarray
    accel: np.ndarray
    e: np.ndarray
    ok: np.ndarray


def fit_arcs(w: Windows, ridge: float = 1e-3) -> ArcFit:
    """Step 1-3 of the module docstring for every window at once."""
    b = w.before
    s_b, xy_b, v_b = w.s[:, :b], w.xy[:, :b], w.valid[:, :b].astype(np.float64)
    # Quadratic in s, weighted by validity; a small ridge on the acceleration keeps two points
    # (a track that has just appeared) a straight line instead of a singular system.
    basis = np.stack([np.ones_like(s_b), s_b, s_b**2], axis=-1)  # (K, b, 3)
    gram = np.einsum("kbi,kb,kbj->kij", basis, v_b, basis)
    gram += np.diag([1e-9, 1e-9, ridge])[None]
    rhs = np.einsum("kbi,kb,kbc->kic", basis, v_b, xy_b)
    coef = np.linalg.solve(gram, rhs)  # (K, 3, 2)
    fitted = np.einsum("kbi,kic->kbc", basis, coef)
    n_b = v_b.sum(axis=1)
    sq = (((xy_b - fitted) ** 2).sum(-1) * v_b).sum(1)
    residual = np.sqrt(sq / np.maximum(1.0, 2.0 * (n_b - 3.0)))
    e, jump, change, u, n_a = _after(w, coef)
    ok = (n_b >= 3) & (n_a >= 2) & w.valid[:, b - 1]
    return ArcFit(
        jump=np.where(ok[:, None], jump, 0.0),
        change=np.where(ok, change, 0.0),
        u=np.clip(np.where(ok, u, 0.5), 0.0, 1.0),
        u_raw=np.where(ok, u, 0.5),
        residual=np.where(ok, residual, 0.0),
        speed=np.where(ok, np.linalg.norm(coef[:, 1], axis=-1), 0.0),
        accel=np.where(ok[:, None], 2.0 * coef[:, 2], 0.0),
        e=e,
        ok=ok,
    )


def _after(
    w: Windows, coef: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Residuals of the frames after the interval's start from the arc `coef` (K, 3, 2) in s,
    and the kink line through them: (e (K, A, 2), jump (K, 2), change (K,), u (K,) unclipped,
    frames used (K,))."""
    b = w.before
    s_a, xy_a, v_a = w.s[:, b:], w.xy[:, b:], w.valid[:, b:].astype(np.float64)
    basis_a = np.stack([np.ones_like(s_a), s_a, s_a**2], axis=-1)
    e = (xy_a - np.einsum("kai,kic->kac", basis_a, coef)) * v_a[..., None]
    # Line e = alpha + D s through the frames after (weighted least squares).
    n_a = v_a.sum(1)
    ms = (v_a * s_a).sum(1) / np.maximum(n_a, 1)
    me = (v_a[..., None] * e).sum(1) / np.maximum(n_a, 1)[:, None]
    ds = (s_a - ms[:, None]) * v_a
    var = (ds * (s_a - ms[:, None])).sum(1)
    jump = (ds[..., None] * (e - me[:, None])).sum(1) / np.maximum(var, 1e-9)[:, None]
    alpha = me - jump * ms[:, None]
    change = np.linalg.norm(jump, axis=-1)
    u = -(alpha * jump).sum(-1) / np.maximum(change**2, 1e-12)
    return e, jump, change, u, n_a


@dataclass(frozen=True)
class SplitFit:
    """`fit_split_arcs`: the arc of the newest segment before the interval, where an earlier
    contact may have split the window. `fit`: as ArcFit, from that segment's arc; `split`:
    (K,) frames of the window before the split (0: none); `rss`: (K,) px^2 of the chosen fit;
    `rss_whole`: (K,) px^2 of one arc through the whole window."""

    fit: ArcFit
    split: np.ndarray
    rss: np.ndarray
    rss_whole: np.ndarray


def fit_split_arcs(w: Windows, noise_px: np.ndarray | None = None, ridge: float = 1e-3) -> SplitFit:
    """One constant acceleration over the window before the interval, but position and velocity
    free to jump between two frames of it (an earlier contact): for every split that leaves two
    frames or more after it, and for none, the least-squares fit; the split with the smallest
    residual wins (its extra freedom is what `rss_whole` lets a reader weigh). The newest
    segment's arc is then extrapolated as in `fit_arcs`. A bounce two frames after the last
    one is judged from the two frames between them and the shared acceleration.

    noise_px: (K,) position noise (std, px) by which a split must lower the residual to be
    taken (a BIC-like 12 sigma^2 for its 4 extra parameters); none: any improvement."""
    b = w.before
    s_b, xy_b = w.s[:, :b], w.xy[:, :b]
    v_b = w.valid[:, :b].astype(np.float64)
    # Every split at once: split 0 is none; else columns < split are the old segment.
    old = (np.arange(b)[None, :] < np.arange(b - 1)[:, None]).astype(np.float64)  # (S, b)
    old = np.broadcast_to(old[:, None, :], (b - 1, *s_b.shape))  # (S, K, b)
    new = 1.0 - old
    s_s = np.broadcast_to(s_b, old.shape)
    basis = np.stack([old, s_s * old, new, s_s * new, s_s**2], axis=-1)  # (S, K, b, 5)
    gram = np.einsum("skbi,kb,skbj->skij", basis, v_b, basis)
    gram += np.diag([1e-6, 1e-6, 1e-9, 1e-9, ridge])
    rhs = np.einsum("skbi,kb,kbc->skic", basis, v_b, xy_b)
    coefs = np.linalg.solve(gram, rhs)  # (S, K, 5, 2)
    resid = xy_b[None] - np.einsum("skbi,skic->skbc", basis, coefs)
    rss_all = ((resid**2).sum(-1) * v_b[None]).sum(-1).T  # (K, S)
    # A split must beat the whole arc clearly: its 4 extra parameters fit noise too.
    sigma = np.zeros(len(w.dt)) if noise_px is None else np.asarray(noise_px, np.float64)
    penalty = np.where(np.arange(b - 1)[None, :] > 0, 1e-3 + 12.0 * sigma[:, None] ** 2, 0.0)
    best = np.argmin(rss_all + penalty, axis=1)
    coef = coefs[best, np.arange(len(best))][:, [2, 3, 4]]  # (K, 3, 2)
    e, jump, change, u, n_a = _after(w, coef)
    n_new = (v_b * (np.arange(b)[None, :] >= best[:, None])).sum(1)
    ok = (n_new >= 2) & (n_a >= 2) & w.valid[:, b - 1]
    rss = rss_all[np.arange(len(best)), best]
    fit = ArcFit(
        jump=np.where(ok[:, None], jump, 0.0),
        change=np.where(ok, change, 0.0),
        u=np.clip(np.where(ok, u, 0.5), 0.0, 1.0),
        u_raw=np.where(ok, u, 0.5),
        residual=np.where(ok, np.sqrt(rss / np.maximum(1.0, 2.0 * v_b.sum(1))), 0.0),
        speed=np.where(ok, np.linalg.norm(coef[:, 1], axis=-1), 0.0),
        accel=np.where(ok[:, None], 2.0 * coef[:, 2], 0.0),
        e=e,
        ok=ok,
    )
    return SplitFit(fit, np.where(ok, best, 0), rss, rss_all[:, 0])


def noise_level(
    times_s: np.ndarray, pixels: np.ndarray, lookahead: int, rows: np.ndarray | None = None
) -> np.ndarray:
    """Per interval k (N-1,) (or per interval of `rows`): the median |third difference| (px,
    the larger coordinate) over the NOISE_FRAMES frames ending at k+1+lookahead: ~NOISE_PER_SIGMA
    times the position noise on smooth arcs; contacts are rare enough not to move a median. 0
    where there is none yet."""
    n = len(times_s)
    k = np.arange(n - 1) if rows is None else np.asarray(rows)
    if n < 4:
        return np.zeros(len(k))
    third = np.abs(np.diff(pixels.astype(np.float64), n=3, axis=0)).max(axis=-1)  # (N-3,)
    span = NOISE_FRAMES - 3  # third differences inside NOISE_FRAMES frames
    padded = np.concatenate([np.full(span - 1, np.nan), third])
    rolling = np.lib.stride_tricks.sliding_window_view(padded, span)  # row j ends at third[j]
    last = np.minimum(k + 1 + lookahead, n - 1) - 3  # newest usable third difference
    rows = rolling[np.clip(last, 0, len(third) - 1)]
    if len(rows) <= 4:  # live use, a row at a time: nanmedian's overhead is most of the cost
        med = np.array(
            [np.median(r[np.isfinite(r)]) if np.isfinite(r).any() else 0.0 for r in rows]
        )
    else:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no estimate yet
            med = np.nanmedian(rows, axis=1)
    return np.where((last >= 0) & np.isfinite(med), med, 0.0)
