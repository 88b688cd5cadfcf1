"""Reference onsets from the simulator's ground truth.

Contacts are impacts and the starts of slides and rolls; their times are the simulator's,
refined below the physics step, so timing errors are measured against the truth, not against a
detector. Two references are built from them:

- `required_reference` (the sync score): the contacts a viewer sees and would expect to hear.
  A contact is required when it is
    in view:  the object's centre projects inside the frame at the contact's time;
    visible:  the contact changes the object's motion on screen by at least
              `VISIBLE_PX_PER_FRAME` pixels per frame at the video's resolution, against the
              motion its last three frames before the contact predict (so gravity alone, which
              bends every arc, is no change);
    audible:  the contact's own sound, rendered alone, is heard by the onset detector within
              CONFIRM_S of it.
  Required contacts closer than MERGE_S merge into one onset (the first). Every other simulated
  contact is "don't care" (`engines.eval.onsets.score_onsets`): an onset there is neither hit
  nor false. Objects in these scenes are never hidden behind scenery, only (rarely, briefly)
  behind each other, which is not modelled.
- `reference_onsets` (masking fidelity): the contacts the detector hears in the true mix, which
  asks whether a track masks contacts the way the truth does, not whether it finds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.audio.contact import render_track
from engines.audio.render import GAIN, impact_sounds, soft_limit
from engines.eval.onsets import MIN_GAP_S, Reference, detect_onsets
from engines.sim.types import GROUND, SimClip

CONFIRM_S = 0.015
MOVING_MPS = 0.01
VISIBLE_PX_PER_FRAME = 0.5
MERGE_S = 0.03
ALONE_PAD_S = (0.06, 0.15)  # the span around a contact its own sound is judged in


@dataclass(frozen=True)
class Contact:
    """One simulated contact: an impact (both objects of a collision together) or the start of
    a slide or roll. `objects`: the indices of the objects involved (the floor is none)."""

    time_s: float
    objects: tuple[int, ...]
    impacts: tuple[int, ...] = ()  # indices into clip.impacts (impacts)
    track: int = -1  # index into clip.tracks (motion starts)


def contacts(clip: SimClip) -> list[Contact]:
    """Every contact of the clip, sorted by time; the two Impacts of one collision are one."""
    groups: dict[tuple[float, frozenset[int]], list[int]] = {}
    for i, impact in enumerate(clip.impacts):
        pair = frozenset(o for o in (impact.object_id, impact.other_id) if o != GROUND)
        groups.setdefault((round(impact.time_s, 9), pair), []).append(i)
    found = [
        Contact(t, tuple(sorted(pair)), impacts=tuple(members))
        for (t, pair), members in groups.items()
    ]
    for i, track in enumerate(clip.tracks):
        pair = tuple(o for o in (track.object_id, track.other_id) if o != GROUND)
        starts = motion_starts(track.time_s, track.slide_speed, track.roll_speed)
        found += [Contact(float(t), pair, track=i) for t in starts]
    return sorted((c for c in found if c.time_s < clip.duration_s), key=lambda c: c.time_s)


def in_view(clip: SimClip, contact: Contact) -> bool:
    """Every object of the contact projects inside the frame at its time."""
    k = int(np.searchsorted(clip.times_s, contact.time_s, side="right")) - 1
    if k < 0 or k + 1 >= len(clip.times_s):
        return False
    t0, t1 = clip.times_s[k], clip.times_s[k + 1]
    f = (contact.time_s - t0) / (t1 - t0)
    xy = (1 - f) * clip.screen_xy[k, list(contact.objects)] + f * clip.screen_xy[
        k + 1, list(contact.objects)
    ]
    return bool(np.isfinite(xy).all() and (np.abs(xy) <= 1.0).all())


def motion_change_px(clip: SimClip, contact: Contact) -> float:
    """How much the contact changes its objects' on-screen motion, in pixels per frame (the
    video's median frame interval) at the video's resolution: the jump at the contact's time
    between the velocity of the arc through the three frames before it and that of the arc
    through the three frames after it (each a parabola, so gravity, which bends every arc, is no
    change). The largest over its objects; 0 where those frames do not exist."""
    times = clip.times_s
    k = int(np.searchsorted(times, contact.time_s, side="right")) - 1
    if k < 2 or k + 3 >= len(times) or not contact.objects:
        return 0.0
    scale = np.array([clip.width / 2, -clip.height / 2])
    pixels = clip.screen_xy[k - 2 : k + 4, list(contact.objects)] * scale  # (6, O, 2)
    if not np.isfinite(pixels).all():
        return 0.0
    t = times[k - 2 : k + 4] - contact.time_s
    flat = pixels.reshape(6, -1)
    # d/dt of the parabola through three points, at t = 0: its linear coefficient.
    before = np.polyfit(t[:3], flat[:3], 2)[1]
    after = np.polyfit(t[3:], flat[3:], 2)[1]
    jump = np.linalg.norm((after - before).reshape(-1, 2), axis=-1)
    return float(jump.max() * np.median(np.diff(times)))


def heard_alone(clip: SimClip, found: list[Contact], sample_rate: int, seed: int) -> np.ndarray:
    """Per contact: whether its own sound, rendered alone at the track's gain, has an onset the
    detector hears within CONFIRM_S of it."""
    impact_audio = list(impact_sounds(clip.impacts, sample_rate=sample_rate, seed=seed))
    n = round(clip.duration_s * sample_rate)
    track_onsets: dict[int, np.ndarray] = {}
    heard = np.zeros(len(found), bool)
    for c, contact in enumerate(found):
        if contact.impacts:
            lo = max(0, round((contact.time_s - ALONE_PAD_S[0]) * sample_rate))
            hi = round((contact.time_s + ALONE_PAD_S[1]) * sample_rate)
            alone = np.zeros(hi - lo)
            for i in contact.impacts:
                start, samples = impact_audio[i]
                a, b = max(start, lo), min(start + len(samples), hi)
                if b > a:
                    alone[a - lo : b - lo] += samples[a - start : b - start]
            onsets = lo / sample_rate + detect_onsets(soft_limit(GAIN * alone), sample_rate)
        else:
            if contact.track not in track_onsets:
                sound = render_track(
                    clip.tracks[contact.track],
                    n_samples=n,
                    sample_rate=sample_rate,
                    seed=seed,
                    rng=np.random.default_rng([seed, 4, contact.track]),
                )
                track_onsets[contact.track] = detect_onsets(soft_limit(GAIN * sound), sample_rate)
            onsets = track_onsets[contact.track]
        heard[c] = bool(len(onsets)) and np.min(np.abs(onsets - contact.time_s)) <= CONFIRM_S
    return heard


def required_reference(
    clip: SimClip,
    *,
    sample_rate: int = 48000,
    seed: int = 0,
    min_px_per_frame: float = VISIBLE_PX_PER_FRAME,
) -> Reference:
    """The contacts in view, visible and audible on their own, merged within MERGE_S; every
    other contact is don't-care. `seed`: the one the clip's soundtrack was synthesised with."""
    found = contacts(clip)
    heard = heard_alone(clip, found, sample_rate, seed)
    required: list[float] = []
    dont_care: list[float] = []
    for contact, audible_alone in zip(found, heard, strict=True):
        wanted = (
            audible_alone
            and in_view(clip, contact)
            and motion_change_px(clip, contact) >= min_px_per_frame
        )
        if wanted and not (required and contact.time_s - required[-1] < MERGE_S):
            required.append(contact.time_s)
        else:
            dont_care.append(contact.time_s)
    return Reference(np.asarray(required, float), np.asarray(dont_care, float))


def contact_starts(clip: SimClip) -> np.ndarray:
    """Impact times and the times slides and rolls begin, sorted."""
    impacts = np.asarray([impact.time_s for impact in clip.impacts], dtype=np.float64)
    return np.sort(np.concatenate([impacts, track_starts(clip)]))


def track_starts(clip: SimClip) -> np.ndarray:
    """The times slides and rolls begin, over all contact pairs (unsorted)."""
    starts = [motion_starts(t.time_s, t.slide_speed, t.roll_speed) for t in clip.tracks]
    return np.concatenate([np.zeros(0), *starts])


def motion_starts(
    time_s: np.ndarray, slide_speed: np.ndarray, roll_speed: np.ndarray
) -> np.ndarray:
    """The times at which one contact pair's sliding or rolling begins."""
    moving = (slide_speed > MOVING_MPS) | (roll_speed > MOVING_MPS)
    begins = np.flatnonzero(moving & ~np.concatenate([[False], moving[:-1]]))
    return time_s[begins].astype(np.float64)


def reference_onsets(clip: SimClip, truth: np.ndarray, sample_rate: int) -> np.ndarray:
    """Audible contact times in seconds, increasing."""
    return audible(contact_starts(clip), truth, sample_rate)


def audible(times: np.ndarray, truth: np.ndarray, sample_rate: int) -> np.ndarray:
    """The sorted contact `times` the detector hears in `truth`, merged within MIN_GAP_S."""
    heard = detect_onsets(truth, sample_rate)
    onsets: list[float] = []
    for t in times:
        if onsets and t - onsets[-1] < MIN_GAP_S:
            continue
        if len(heard) and np.min(np.abs(heard - t)) <= CONFIRM_S:
            onsets.append(float(t))
    return np.asarray(onsets)
