"""Which model frames the visual encoder has to see: static skip and known features.

The encoder's feature for frame t is a function of frame t, frame t - 1 and t's age (contract in
engines.models.encoder; its streaming state is the previous frame's patch embedding, which is
linear in the pixels). Two kinds of frames need not run through it:

- static: a frame within `threshold` of a reference of its static span with the same age (within
  AGE_TOLERANCE). A static span is a run of frames each within `threshold` of its predecessor;
  its references are exact frames (encoded or known): its first frame, then the first frame of
  each further age (a 24 or 25 fps source shows one picture at several ages, and age moves the
  features), each within `threshold` of the first. A static frame's feature is, up to that
  difference, its reference's, and is filled in from it. Every skipped frame is compared with an
  exact frame, never with a skipped one, so a slow drift does not accumulate over a long span:
  it ends the span once it passes the threshold.
- known: its feature is already in a feature cache (service.pipeline.memo.FeatureCache), keyed by
  its pixels, its predecessor's and its age.

A frame the encoder runs on needs its predecessor's embedding in the encoder state. When the
predecessor did not run (skipped or known), it runs just before the frame, in the same call, and
its own output is dropped: the one call per push stays one call, and the feature of the first
moving frame after a static span, where a contact is most likely to start, is exact.

Motion is the mean absolute difference over BLOCK x BLOCK blocks of model pixels (0..255 levels),
the largest block counting: a small object moving shows in its block, where a whole-frame mean
would dilute it below the codec's noise. Measured on simulated clips encoded with H.264 (crf 18,
decoded at 96x96): a static span's P-frames differ by at most 0.38 (0.26 from 1280x720), a
keyframe by 1-2.5 (it runs), a rolling ball moves by at least 0.46 (median 6.8); the whole-frame
mean of that roll, 0.003 (median 0.1), is under the static span's keyframe noise. Hence the
default threshold of 0.5: it moves the track less than re-encoding the same frames a little
harder does, and adds or loses no onset (`python -m bench.caches`; docs/benchmarks.md, and
tests/pipeline/test_caches.py, which holds it to that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from service.pipeline.preprocess import ModelFrames

# 8 x 8 model pixels (1/12 of the 96-pixel frame) is about the size of the smallest object the
# model is trained to hear.
BLOCK = 8
# Ages (in model frames) that count as equal. A 29.97 fps source drifts by 0.001 frame per frame
# against the model's 30, so exact equality would never skip one; the encoder's features move by
# at most 0.5 per frame of age (linearly, measured on the shipped tier), so 0.02 moves them by at
# most 0.01, under the H.264 noise between two encodings of one frame (0.03-0.08).
AGE_TOLERANCE = 0.02
SPAN_AGES = 8  # references a static span keeps, its first frame included

RUN, STATIC, KNOWN = 0, 1, 2

LookupFn = Callable[[int], np.ndarray | None]  # frame index -> its cached feature, if any


@dataclass
class Reference:
    """An exact frame of the current static span: static frames of its age take its feature."""

    rgb: np.ndarray
    age: float
    index: int  # in the push that planned it; -1 once its feature is known
    feature: np.ndarray | None = None


@dataclass
class EncoderTrack:
    """What a stream keeps from one push to the next for planning its encoder input."""

    last_rgb: np.ndarray | None = None  # the previous model frame (H, W, 3) uint8
    current: bool = True  # the encoder state holds last_rgb's embedding (or nothing ran yet)
    # The static span the previous frame belongs to (empty: it moved): its first exact frame,
    # then one per further age (a 25 fps source shows its frames at six ages in turn).
    span: list[Reference] = field(default_factory=list)


@dataclass(frozen=True)
class EncoderPlan:
    """`modes` per frame (RUN, STATIC, KNOWN); `run`: what the encoder sees, as frame indices
    (-1: the previous push's last frame), and `keep`: which of its outputs are features of this
    push (the others only set up their successor's state); `known`: cached features by frame;
    `static`: each static frame's reference; `span`: the static span after the push."""

    modes: np.ndarray
    run: np.ndarray
    keep: np.ndarray
    known: dict[int, np.ndarray]
    static: dict[int, Reference]
    span: list[Reference]


def block_motion(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, H, W, 3) uint8 twice -> (n,) the largest BLOCK x BLOCK mean absolute difference."""
    n, h, w, c = a.shape
    hb, wb = h // BLOCK, w // BLOCK
    a, b = a[:, : hb * BLOCK, : wb * BLOCK], b[:, : hb * BLOCK, : wb * BLOCK]
    d = np.maximum(a, b) - np.minimum(a, b)  # |a - b| without widening to int16: 3x faster
    rows = d.reshape(n, hb, BLOCK, wb * BLOCK * c).sum(axis=2, dtype=np.uint16)
    blocks = rows.reshape(n, hb, wb, BLOCK * c).sum(axis=3, dtype=np.uint32)
    largest: np.ndarray = blocks.max(axis=(1, 2)) / float(BLOCK * BLOCK * c)
    return largest


def plan(
    track: EncoderTrack,
    rgb: np.ndarray,
    age: np.ndarray,
    *,
    threshold: float,
    lookup: LookupFn | None = None,
) -> EncoderPlan:
    """Decide, frame by frame, which frames run. With `threshold` 0 and no `lookup` all of them
    run, in one call from the stream's state: exactly the encoder call without this module."""
    modes = np.full(len(age), RUN, np.int8)
    known: dict[int, np.ndarray] = {}
    static: dict[int, Reference] = {}
    span = track.span
    if threshold > 0 or lookup is not None:
        span = _decide(track, rgb, age, threshold, lookup, modes, known, static)
    run, keep = _encoder_input(track, modes)
    return EncoderPlan(modes, run, keep, known, static, span)


def _decide(
    track: EncoderTrack,
    rgb: np.ndarray,
    age: np.ndarray,
    threshold: float,
    lookup: LookupFn | None,
    modes: np.ndarray,
    known: dict[int, np.ndarray],
    static: dict[int, Reference],
) -> list[Reference]:
    """Fill `modes`, `known` and `static`; returns the static span after the push."""
    to_previous = _motion_to_previous(track, rgb) if threshold > 0 else None
    to_reference = _AgainstReference(rgb)
    span = list(track.span) if to_previous is not None else []
    for i in range(len(age)):
        ref = next((r for r in span if abs(r.age - float(age[i])) <= AGE_TOLERANCE), None)
        if ref is not None and to_reference(i, ref) < threshold:
            modes[i], static[i] = STATIC, ref
            continue
        feature = lookup(i) if lookup is not None else None
        if feature is not None:
            modes[i], known[i] = KNOWN, feature
        if to_previous is None:
            continue
        still = bool(to_previous[i] < threshold)
        if not (still and ref is None and span and to_reference(i, span[0]) < threshold):
            span = []  # it moved, or drifted from the span's first frame: a new span, or none
        if still:
            span.append(Reference(rgb[i].copy(), float(age[i]), i))  # not a view of the push
            if len(span) > SPAN_AGES:  # a 29.97 fps source's ages drift on: keep the newest
                del span[1]
    return span


class _AgainstReference:
    """Frames' motion against references, computed for a few frames at a time per reference: a
    static span costs one vectorised call per few frames instead of one per frame."""

    AHEAD = 8

    def __init__(self, rgb: np.ndarray) -> None:
        self.rgb = rgb
        # id(reference) -> (the reference, kept so that its id is not reused; first frame; values)
        self.done: dict[int, tuple[Reference, int, np.ndarray]] = {}

    def __call__(self, i: int, ref: Reference) -> float:
        _, start, values = self.done.get(id(ref), (ref, 0, np.zeros(0)))
        if not start <= i < start + len(values):
            start, values = i, block_motion(self.rgb[i : i + self.AHEAD], ref.rgb[None])
            self.done[id(ref)] = (ref, start, values)
        return float(values[i - start])


def _motion_to_previous(track: EncoderTrack, rgb: np.ndarray) -> np.ndarray:
    """Each frame's motion against the one before it; a stream's first frame stands for its own
    predecessor (the encoder contract): no motion."""
    if track.last_rgb is None:
        return np.concatenate([[0.0], block_motion(rgb[1:], rgb[:-1])])
    return block_motion(rgb, np.concatenate([track.last_rgb[None], rgb[:-1]]))


def _encoder_input(track: EncoderTrack, modes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    run: list[int] = []
    keep: list[bool] = []
    for i in np.flatnonzero(modes == RUN).tolist():
        ready = modes[i - 1] == RUN if i > 0 else track.current or track.last_rgb is None
        if not ready:
            run.append(i - 1)
            keep.append(False)
        run.append(i)
        keep.append(True)
    return np.asarray(run, np.int64), np.asarray(keep, bool)


def encoder_input(
    track: EncoderTrack, frames: ModelFrames, plan: EncoderPlan
) -> tuple[np.ndarray, np.ndarray]:
    """The plan's encoder input: frames (m, H, W, 3) uint8, age (m,)."""
    rgb, age = frames.rgb, frames.age
    if len(plan.run) == len(age) and plan.run[0] >= 0:  # everything runs, in order: no copy
        return rgb, age
    if plan.run[0] < 0:
        assert track.last_rgb is not None
        rgb = np.concatenate([track.last_rgb[None], rgb])
        age = np.concatenate([age[:1], age])  # the predecessor's own output is dropped
        return rgb[plan.run + 1], age[plan.run + 1]
    return rgb[plan.run], age[plan.run]


def assemble(plan: EncoderPlan, outputs: np.ndarray, dim: int) -> np.ndarray:
    """The push's features (n, dim): encoder outputs and known features where they are, each
    static frame filled with its reference's."""
    features = np.empty((len(plan.modes), dim), np.float32)
    features[plan.run[plan.keep]] = outputs[plan.keep]
    for i, feature in plan.known.items():
        features[i] = feature
    for i, ref in plan.static.items():
        features[i] = features[ref.index] if ref.index >= 0 else ref.feature
    return features


def advance(track: EncoderTrack, rgb: np.ndarray, plan: EncoderPlan, features: np.ndarray) -> None:
    """Carry the push's end into the next: its last frame, whether the encoder state holds that
    frame's embedding, and the static span with its features."""
    if not len(rgb):
        return
    span = []
    for ref in plan.span:
        if ref.index >= 0:
            ref = Reference(ref.rgb, ref.age, -1, features[ref.index])
        span.append(ref)
    track.span = span
    track.current = bool(len(plan.run)) and plan.run[-1] == len(rgb) - 1
    track.last_rgb = rgb[-1].copy()  # a view would keep the whole push alive
