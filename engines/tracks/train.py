"""Train the contact head (engines.tracks.head) on simulated tracks.

    python -m engines.tracks.train runs/tracks/head.pt --prepare   # data (long, resumable)
    python -m engines.tracks.train runs/tracks/head.pt             # train (~5-9 min)
    python -m engines.tracks.train runs/tracks/head_la2.pt --lookahead 2 [--prepare]

Training scenes are seeds 0..scenes-1 (the fresh distribution; held-out scenes never), each
filmed at `timings` random native frame timings (engines.tracks.data.sample_timing). Each of
`rounds` noise rounds redraws per track the detector noise (none a quarter of the time, else
Gaussian 0-MAX_NOISE_PX), missed detections (0-3 % on 30 % of tracks) and, with probability
`view_p`, a reframed view (zoom 0.75-1.35, vertical squash 0.6-1: engines.tracks.data.reframe),
and computes the features; rounds are cached on disk (--prepare computes them alone; the scene
physics under data/tracks/ is simulated on first use). Easy negatives (intervals whose 4-frame
arc sees a velocity change below EASY_PX) are subsampled and weighted up in the loss.

Loss: binary cross-entropy on the interval label (don't-care intervals skipped) plus a Huber
loss on the contact time error in units of TIME_SCALE_S (so an error costs the same in ms at
every frame rate), on positive intervals and, weighted `neighbour_weight`, on their two
neighbours. The learning rate decays on a cosine over all rounds; `minutes` stops early (with
the rate not yet decayed: give it time). The firing threshold is chosen on validation scenes
(seeds VAL_SEED.., below 1e6 and never trained on) for the best mean F1 over noise 0, 0.25
and 0.5 px.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import pickle
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from engines.tracks.data import (
    CACHE_DIR,
    CACHE_VERSION,
    TrainTrack,
    augment,
    film,
    frame_times,
    load_scenes,
    reframe,
    sample_timing,
)
from engines.tracks.evaluate import eval_clips, run_scored, score_tracks, summary_row, total
from engines.tracks.head import ContactHead, HeadDetector, save_head
from service.pipeline.contacts.features import FEATURE_VERSION, HeadConfig, track_features

log = logging.getLogger(__name__)

VAL_SEED = 990_000
EASY_PX = 0.8
EASY_KEEP = 0.2
TIME_SCALE_S = 0.005
MAX_NOISE_PX = 0.3  # position noise of the simulated tracks, drawn up to this (std, model px)
VAL_NOISE: tuple[float, ...] = (0.0, 0.25, 0.5)


def training_tracks(scenes: int, timings: int, seed: int = 0) -> list[TrainTrack]:
    """Every object track of seeds 0..scenes-1 filmed at `timings` random timings (cached)."""
    path = CACHE_DIR / "train" / f"v{CACHE_VERSION}_{scenes}x{timings}_s{seed}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    rng = np.random.default_rng(seed)
    tracks = []
    for record in load_scenes(range(scenes), holdout=False, log_every=500):
        for _ in range(timings):
            rate, fps = sample_timing(rng)
            times = frame_times(rate, record.duration_s, int(rng.integers(2**31)), fps=fps)
            filmed = film(record, times, rate)
            for o in range(filmed.pixels.shape[1]):
                tracks.append(
                    TrainTrack(
                        filmed.times_s, filmed.pixels[:, o], filmed.label[:, o], filmed.offset[:, o]
                    )
                )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(tracks, f, protocol=pickle.HIGHEST_PROTOCOL)
    return tracks


@dataclasses.dataclass
class Batch:
    features: torch.Tensor  # (M, F)
    label: torch.Tensor  # (M,) 1 / 0 / -1
    offset: torch.Tensor  # (M,) u, NaN unless positive
    dt: torch.Tensor  # (M,) s
    weight: torch.Tensor  # (M,)


def noisy_round(
    tracks: list[TrainTrack],
    config: HeadConfig,
    rng: np.random.Generator,
    view_p: float = 0.0,
    max_noise: float = MAX_NOISE_PX,
) -> Batch:
    """Features of every track under a fresh noise draw (position noise up to `max_noise` px,
    and, with probability `view_p`, a reframed view: engines.tracks.data.reframe), easy
    negatives subsampled."""
    feats, labels, offsets, dts, weights = [], [], [], [], []
    for track in tracks:
        noise = 0.0 if rng.random() < 0.25 else float(rng.uniform(0.0, max_noise))
        drop = float(rng.uniform(0.0, 0.03)) if rng.random() < 0.3 else 0.0
        clean = reframe(track.pixels, rng) if rng.random() < view_p else track.pixels
        pixels = augment(clean, rng, noise, drop)
        f = track_features(track.times_s, pixels, config)
        change_px = np.expm1(np.abs(f[:, _arc4_change_column(config)])) * 0.25
        easy = (track.label == 0) & (change_px < EASY_PX)
        keep = ~easy | (rng.random(len(easy)) < EASY_KEEP)
        feats.append(f[keep])
        labels.append(track.label[keep])
        offsets.append(time_targets(track)[keep])
        dts.append(np.diff(track.times_s)[keep])
        weights.append(np.where(easy, 1.0 / EASY_KEEP, 1.0)[keep])
    return Batch(
        torch.from_numpy(np.concatenate(feats)),
        torch.from_numpy(np.concatenate(labels).astype(np.int64)),
        torch.from_numpy(np.concatenate(offsets).astype(np.float32)),
        torch.from_numpy(np.concatenate(dts).astype(np.float32)),
        torch.from_numpy(np.concatenate(weights).astype(np.float32)),
    )


def observed_batch(tracks: list[TrainTrack], config: HeadConfig, weight: float) -> Batch:
    """The localiser's real tracks (engines.tracks.observed) as they are: no noise added, every
    interval kept, each weighing `weight`."""
    feats = [track_features(t.times_s, t.pixels, config) for t in tracks]
    labels = np.concatenate([t.label for t in tracks])
    return Batch(
        torch.from_numpy(np.concatenate(feats)),
        torch.from_numpy(labels.astype(np.int64)),
        torch.from_numpy(np.concatenate([time_targets(t) for t in tracks]).astype(np.float32)),
        torch.from_numpy(np.concatenate([np.diff(t.times_s) for t in tracks]).astype(np.float32)),
        torch.full((len(labels),), float(weight)),
    )


def time_targets(track: TrainTrack) -> np.ndarray:
    """Per interval (N-1,): the contact time to regress, in units of the interval from its
    start: u on a positive interval, and on its neighbours (if not positive themselves) the
    same time seen from them (< 0 from the next, > 1 from the previous): a contact one
    interval off still gets its own time back. NaN elsewhere."""
    target = track.offset.astype(np.float64).copy()
    dt = np.diff(track.times_s)
    for k in np.flatnonzero(track.label == 1):
        t_c = track.times_s[k] + track.offset[k] * dt[k]
        for j in (k - 1, k + 1):
            if 0 <= j < len(dt) and track.label[j] != 1:
                target[j] = (t_c - track.times_s[j]) / dt[j]
    return target.astype(np.float32)


def _arc4_change_column(config: HeadConfig) -> int:
    """Column of the 4-frame arc's velocity change in track_features' layout."""
    w = config.context + 1 + config.lookahead
    return 1 + 5 * (w - 1) + (4 + 2 * (config.lookahead + 1))  # the second arc (4 frames)


def loss_fn(
    head: ContactHead, batch: Batch, idx: torch.Tensor, neighbour_weight: float = 1.0
) -> torch.Tensor:
    """Weighted BCE on the labels plus the timing Huber loss (the module docstring); a
    neighbour interval's timing term weighs `neighbour_weight`."""
    logit, u = head(batch.features[idx])
    label = batch.label[idx]
    weight = batch.weight[idx] * (label >= 0)
    bce = F.binary_cross_entropy_with_logits(logit, (label == 1).float(), reduction="none")
    cls = (bce * weight).sum() / weight.sum().clamp(min=1.0)
    target = batch.offset[idx]
    pos = torch.isfinite(target)
    if pos.any():
        err = (u[pos] - target[pos]) * batch.dt[idx][pos] / TIME_SCALE_S
        w = torch.where(label[pos] == 1, 1.0, neighbour_weight)
        reg = (F.huber_loss(err, torch.zeros_like(err), delta=1.0, reduction="none") * w).mean()
    else:
        reg = logit.new_zeros(())
    return cls + reg


def round_batch(
    tracks: list[TrainTrack],
    config: HeadConfig,
    name: str,
    r: int,
    view_p: float = 0.0,
    max_noise: float = MAX_NOISE_PX,
) -> Batch:
    """Noise round `r` of a training set `name` (its features under the round's own noise
    draw), computed once and cached on disk: training runs that differ only in the model or
    the loss reuse them."""
    key = f"f{FEATURE_VERSION}_la{config.lookahead}_c{config.context}_{name}_n{max_noise:g}"
    if view_p > 0:
        key += f"_view{view_p:g}"
    path = CACHE_DIR / "rounds" / key / f"r{r:03d}.pt"
    if path.exists():
        return Batch(**torch.load(path, weights_only=True))
    batch = noisy_round(tracks, config, np.random.default_rng([r, 7]), view_p, max_noise)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(dataclasses.asdict(batch), tmp)
    tmp.replace(path)
    return batch


def train(
    tracks: list[TrainTrack],
    config: HeadConfig,
    *,
    name: str,
    rounds: int,
    epochs_per_round: int = 2,
    batch_size: int = 2048,
    lr: float = 3e-3,
    seed: int = 0,
    minutes: float = 8.0,
    view_p: float = 0.0,
    neighbour_weight: float = 1.0,
    observed: Batch | None = None,
    max_noise: float = MAX_NOISE_PX,
) -> ContactHead:
    """Trains a head on noise rounds 0..rounds-1 in turn, `epochs_per_round` passes each (or
    until `minutes` of training have passed: computing a round that is not cached yet does not
    count, so a fresh machine trains the same rounds as one with the cache), with a cosine
    learning-rate decay over the whole. `observed` (engines.tracks.observed: the localiser's
    real tracks) joins every round."""
    torch.manual_seed(seed)
    head = ContactHead(config)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=1e-4)
    started = time.perf_counter()
    schedule_steps = None
    step = 0
    for r in range(rounds):
        preparing = time.perf_counter()
        batch = round_batch(tracks, config, name, r, view_p, max_noise)
        started += time.perf_counter() - preparing
        if observed is not None:
            batch = Batch(
                *(
                    torch.cat([getattr(batch, f.name), getattr(observed, f.name)])
                    for f in dataclasses.fields(Batch)
                )
            )
        m = len(batch.label)
        steps_per_epoch = m // batch_size
        if schedule_steps is None:
            schedule_steps = rounds * epochs_per_round * steps_per_epoch
        head.train()
        losses = []
        for _ in range(epochs_per_round):
            order = torch.randperm(m)
            for i in range(steps_per_epoch):
                frac = min(1.0, step / max(1, schedule_steps))
                for group in optimizer.param_groups:  # cosine decay
                    group["lr"] = lr * 0.5 * (1 + np.cos(np.pi * frac))
                idx = order[i * batch_size : (i + 1) * batch_size]
                loss = loss_fn(head, batch, idx, neighbour_weight)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
                step += 1
        elapsed = (time.perf_counter() - started) / 60
        log.info(
            "round %d: %d intervals (%d positive), loss %.4f, %.1f min",
            r,
            m,
            int((batch.label == 1).sum()),
            float(np.mean(losses)),
            elapsed,
        )
        if elapsed > minutes:
            log.info("time budget reached after round %d", r)
            break
    return head.eval()


def choose_threshold(head: ContactHead, count: int = 60) -> tuple[float, dict[float, float]]:
    """The probability threshold with the best mean F1 over VAL_NOISE on validation scenes."""
    clips = eval_clips(holdout=False, count=count, first=VAL_SEED)
    detector = HeadDetector(head)
    scored = {noise: score_tracks(detector.scores, clips, noise) for noise in VAL_NOISE}
    table = {}
    for threshold in np.arange(0.1, 0.91, 0.05):
        f1s = [summary_row(total(run_scored(scored[n], clips, threshold)))[0] for n in VAL_NOISE]
        table[round(float(threshold), 2)] = float(np.mean(f1s))
    return max(table, key=lambda t: table[t]), table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scenes", type=int, default=2400)
    parser.add_argument("--timings", type=int, default=3)
    parser.add_argument("--lookahead", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=9.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--view-p", type=float, default=0.5, help="reframed-view probability")
    parser.add_argument("--neighbour-weight", type=float, default=0.3)
    parser.add_argument(
        "--max-noise", type=float, default=MAX_NOISE_PX, help="simulated tracks' noise, px"
    )
    parser.add_argument(
        "--prepare", action="store_true", help="only compute (and cache) the noise rounds"
    )
    parser.add_argument(
        "--observed", type=int, default=0, help="clips of the localiser's real tracks to add"
    )
    parser.add_argument("--observed-weight", type=float, default=3.0)
    parser.add_argument(
        "--unseen",
        type=int,
        default=0,
        help="clips of real tracks on seeds the localiser never trained on (from --observed on)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = HeadConfig(lookahead=args.lookahead, hidden=args.hidden)
    tracks = training_tracks(args.scenes, args.timings)
    name = f"{args.scenes}x{args.timings}"
    log.info("%d training tracks", len(tracks))
    if args.prepare:
        for r in range(args.rounds):
            round_batch(tracks, config, name, r, args.view_p, args.max_noise)
            log.info("round %d ready", r)
        return
    observed = None
    if args.observed:
        from engines.tracks.observed import build

        real = [t.track for t in build(args.observed)]
        if args.unseen:
            real += [t.track for t in build(args.unseen, first=args.observed)]
        observed = observed_batch(real, config, args.observed_weight)
        log.info(
            "%d observed intervals (%d positive)",
            len(observed.label),
            int((observed.label == 1).sum()),
        )
    head = train(
        tracks,
        config,
        name=name,
        rounds=args.rounds,
        epochs_per_round=args.epochs,
        lr=args.lr,
        seed=args.seed,
        minutes=args.minutes,
        view_p=args.view_p,
        neighbour_weight=args.neighbour_weight,
        observed=observed,
        max_noise=args.max_noise,
    )
    threshold, table = choose_threshold(head)
    log.info("validation mean F1 by threshold: %s", table)
    head.config = dataclasses.replace(config, threshold=threshold)
    save_head(head, args.out)
    log.info("saved %s (threshold %.2f)", args.out, threshold)


if __name__ == "__main__":
    main()
