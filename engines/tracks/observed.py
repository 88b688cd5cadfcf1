"""Tracks as the service sees them: the shipped localiser and the tracker run on rendered frames,
labelled from the simulation, for training the contact head on what it will really read.

Clean simulated tracks with Gaussian noise (engines.tracks.train) miss what the localiser really
does: position errors that follow the picture (shading, the floor's texture, overlaps), missed
frames in runs, identities swapped, and tracks of things that are not objects. Here the
localiser's cached training clips (engines.train.localiser: the frames of seeds 0.., at their own
frame rates) go through the tier's localiser graph and the service's tracker exactly as
service.pipeline.contacts.synth runs them; each track is matched to the simulated object it
follows most of the time (within MATCH_PX), whose interval labels, contact times and impulses
(engines.tracks.data.film, the same scene's physics filmed at the same times) it takes. A track
that follows no object is all negatives.

    python -m engines.tracks.observed [--clips 720]    # builds and caches the set

Cached under data/tracks/observed/, keyed by the localiser graph's digest and the sources of the
tracker and the registration (any of them changes the tracks).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import pickle
from fractions import Fraction
from pathlib import Path

import numpy as np

from engines.tracks.data import CACHE_DIR, ObservedTrack, TrainTrack, film, load_scenes
from engines.train.localiser import CLIP_S, RATES, cached_clip
from service.config import SHIPPED_MODELS_DIR
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contacts import refine, tracking
from service.pipeline.contacts.synth import ContactSynth, track_frame
from service.pipeline.contacts.tier import ContactTier, load_contact_tier
from service.pipeline.contacts.tracking import Track, Tracker

log = logging.getLogger(__name__)
MATCH_PX = 3.0
MATCH_SHARE = 0.5
ARTIFACTS = SHIPPED_MODELS_DIR
LOCALISER_DATA = Path(__file__).resolve().parents[2] / "data" / "localiser"


def clip_fps(seed: int) -> Fraction:
    """The frame rate engines.train.localiser.film_clip drew for `seed`."""
    rng = np.random.default_rng([seed, 41])
    return Fraction(int(rng.choice(RATES)))


def observe(tier: ContactTier, backend: Backend, times: np.ndarray, rgb: np.ndarray) -> list[Track]:
    """Every track of a clip, as the service's stream forms them (cuts end all tracks): the
    stream's own preparation of the frames (ContactSynth.prepare), the tier's localiser."""
    frames = ContactSynth(tier, backend).prepare(times, rgb)
    if frames is None:
        return []
    found = backend.run("localiser", frames.inputs)
    tracker = Tracker()
    for k, t in enumerate(times):
        if frames.cut[k]:
            tracker.reset()
        track_frame(tracker, float(t), frames, found, k)
    tracker.reset()
    return tracker.ended


def labelled(
    track: Track, frame_index: np.ndarray, pixels: np.ndarray, label, offset, impulse
) -> tuple[TrainTrack, np.ndarray, int]:
    """The track with the labels of the object it follows: (TrainTrack, impulse per interval,
    object index or -1)."""
    xy = np.stack(track.xy)
    seen = np.isfinite(xy).all(axis=1)
    gt = pixels[frame_index]  # (n, O, 2)
    close = np.linalg.norm(gt - xy[:, None, :], axis=-1) <= MATCH_PX  # NaN compares False
    votes = (close & seen[:, None]).sum(axis=0)
    n = len(frame_index) - 1
    o = int(np.argmax(votes)) if len(votes) else -1
    if o < 0 or votes[o] < MATCH_SHARE * max(int(seen.sum()), 1):
        return (
            TrainTrack(
                np.asarray(track.times_s),
                xy.astype(np.float32),
                np.zeros(n, np.int8),
                np.full(n, np.nan, np.float32),
            ),
            np.full(n, np.nan, np.float32),
            -1,
        )
    rows = frame_index[:-1]
    return (
        TrainTrack(
            np.asarray(track.times_s), xy.astype(np.float32), label[rows, o], offset[rows, o]
        ),
        impulse[rows, o],
        o,
    )


def build(clips: int, tier_name: str = "objects", *, first: int = 0) -> list[ObservedTrack]:
    """The tracks of seeds first .. first + clips - 1 (the localiser trained on seeds below
    engines.build_objects.LOCALISER_CLIPS: later seeds show its errors on unseen pictures)."""
    tier = load_contact_tier(ARTIFACTS, tier_name, strength=False)
    key = hashlib.sha256((tier.path / tier.localiser.file).read_bytes())
    key.update(Path(tracking.__file__).read_bytes())
    key.update(Path(refine.__file__).read_bytes())
    digest = key.hexdigest()[:12]
    name = f"{digest}_{clips}" if first == 0 else f"{digest}_{first}+{clips}"
    path = CACHE_DIR / "observed" / f"{name}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    backend = create_backend("cpu", tier, threads=1)
    out: list[ObservedTrack] = []
    matched = total = 0
    for seed in range(first, first + clips):
        frames, targets = cached_clip(LOCALISER_DATA, seed, False)
        fps = clip_fps(seed)
        times = [Fraction(k) / fps for k in range(math.ceil(CLIP_S * fps))]
        assert len(times) == len(frames), (seed, len(times), len(frames))
        (record,) = load_scenes([seed], holdout=False)
        filmed = film(record, times)
        drift = np.nanmax(np.abs(filmed.pixels - targets.xy), initial=0.0)
        if drift > 0.05:
            raise ValueError(f"seed {seed}: filmed positions differ from the frames' by {drift}")
        times_s = filmed.times_s
        for track in observe(tier, backend, times_s, frames):
            if len(track.times_s) < 3:
                continue
            index = np.rint(np.asarray(track.times_s) * float(fps)).astype(int)
            item, impulse, o = labelled(
                track, index, filmed.pixels, filmed.label, filmed.offset, filmed.impulse
            )
            out.append(
                ObservedTrack(
                    item,
                    impulse,
                    np.asarray(track.radius, np.float32),
                    np.stack(track.materials).astype(np.float32),
                    o,
                    seed,
                )
            )
            matched += o >= 0
            total += 1
        if (seed - first) % 50 == 49:
            log.info("%d clips: %d tracks, %d matched", seed - first + 1, total, matched)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=720)
    parser.add_argument("--tier", default="objects")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    tracks = build(args.clips, args.tier)
    positives = sum(int((t.track.label == 1).sum()) for t in tracks)
    print(f"{len(tracks)} tracks, {positives} positive intervals")


if __name__ == "__main__":
    main()
