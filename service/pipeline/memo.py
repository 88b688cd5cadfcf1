"""Work kept in a `Cache` (service.cache) and reused: windows of generator and vocoder output,
and encoder features per frame.

Window memo. A window's audio and contact events are a function of its features and of the
generator and vocoder state at its start (the stage contract, service.pipeline.contract). Those
states are bounded histories of inputs (conv histories, the last second of emitted contact
sounds, the last 0.1 s of continuous power), with no recursion, so the state at a window's start
is a function of the features before it within the stages' receptive fields (its context,
service.pipeline.windows.context_frames). An entry keeps the window's mel, audio and events and
the state at its start and at its end. Two keys lead to it:

- exact, `win:v1:<tier>:<version>:<digest>:<length>:<sha256>` of the window's features and its
  context, rounded to FEATURE_STEP: the same decoded frames meet their entry again (a re-render;
  the unchanged spans of an edited clip, before the edit and, once its context is clear of the
  edit, after it). The window takes the audio, the events and the end state, skipping both
  stages, once the stored start state is checked against the stream's (every tensor within
  STATE_TOLERANCE x max(1, its largest magnitude); the rounding difference between two
  chunkings of one stream is ~1e-6 of that).
- template, `tpl:v1:<tier>:<version>:<digest>:<length>:<signature>`, the signs of the window's
  mean feature along TEMPLATE_BITS fixed directions, pointing at the exact key of the last window
  stored with that signature: a repeated motion whose frames are not bit-identical (a looped
  shot re-encoded, the same bounce again). The generator still runs: the stored vocoder output
  is taken only when the generator made the same events as the stored window and a mel within
  TEMPLATE_MEL_TOLERANCE (amplitude, of the stored window's loudest band), and the vocoder
  starts within TEMPLATE_STATE_TOLERANCE of the stored start. Contact events are always the
  generator's own; a template only saves rendering a mel the vocoder has rendered before.
  Measured by `python -m bench.caches` on eight looped scenes: see docs/benchmarks.md for the
  hit rate, the time saved and the onsets against the track without templates.

Feature cache. An encoder feature is a function of a frame's pixels, its predecessor's and its
age: `feat:v1:<tier>:<version>:<digest>:<sha256>` of the two frames' digests and the age holds it,
so a re-render of an edited clip runs the encoder only on the frames that changed.

Values (layout v1, float32 little-endian after an int32 header): a count of segments and their
lengths, then the segments: mel, audio, events, then for the start and the end state every
generator and vocoder state tensor (contract order) as the indices of its nonzero columns (last
axis) and those columns, or [-1] and the whole tensor for a small one: the emitted contact
sounds, most of the state's bytes, are zero between contacts. A value in another layout reads
as a miss.

Thread-safety: `WindowMemo` and `FeatureCache` hold no per-render state (counters are the
caller's), and the `Cache` is thread-safe: one instance serves every render.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from service.pipeline.contract import TierConfig
from service.pipeline.windows import Window

if TYPE_CHECKING:  # the pipeline takes any store; importing the package would import redis
    from service.cache.base import Cache

log = logging.getLogger(__name__)

LAYOUT = "v1"  # bump when a key or the value layout changes: old entries are then never read
STAGES = ("generator", "vocoder")
FEATURE_STEP = 1e-3  # exact keys: features rounded to this
STATE_TOLERANCE = 1e-4
TEMPLATE_BITS = 16
# 0.05 let one window in 120 (eight looped scenes) lift a track at the onset detector's floor
# into 3 onsets the track without templates lacks; 0.02 adds none and keeps 38 of the 41 hits.
TEMPLATE_MEL_TOLERANCE = 0.02
TEMPLATE_STATE_TOLERANCE = 0.02

SPARSE_SIZE = 8192  # state tensors at least this large are kept as their nonzero columns
_WHOLE = np.array([-1.0], np.float32)

State = dict[str, dict[str, np.ndarray]]


@dataclass(frozen=True)
class Recalled:
    """A stored window taken for the current one: `events` are acoustic frames from its start;
    `end` the state after it, of both stages (exact) or of the vocoder (template)."""

    audio: np.ndarray
    events: np.ndarray
    end: State
    template: bool


@dataclass(frozen=True)
class _Entry:
    mel: np.ndarray
    audio: np.ndarray
    events: np.ndarray
    start: State
    end: State


class WindowMemo:
    def __init__(self, cache: Cache, tier: TierConfig, *, templates: bool) -> None:
        self.cache, self.tier, self.templates = cache, tier, templates
        self._prefix = f"{LAYOUT}:{tier.name}:{tier.version}:{tier.digest}"
        self._shapes = {
            stage.name: {name: _shape(shape) for name, shape in stage.state.items()}
            for stage in tier.stages
            if stage.name in STAGES
        }
        # Fixed directions: the same signature in every process and every render.
        rng = np.random.default_rng(20_240_531)
        self._directions = rng.standard_normal((tier.feature_dim, TEMPLATE_BITS)).astype(np.float32)

    def recall(self, window: Window, state: State) -> Recalled | None:
        """The stored window with these features and context, from (close to) this state."""
        entry = self._load(self._exact_key(window))
        if entry is None or not _close(state, entry.start, STATE_TOLERANCE):
            return None
        return Recalled(entry.audio, entry.events, entry.end, template=False)

    def recall_template(
        self, window: Window, mel: np.ndarray, events: np.ndarray, state: State
    ) -> Recalled | None:
        """The vocoder's output stored for a window with this motion signature, if the
        generator made (close to) the same mel and the same events of it, and the vocoder
        starts from (close to) the same state."""
        pointer = self.cache.get(self._template_key(window.features))
        if pointer is None or not pointer.isascii():
            return None
        entry = self._load(pointer.decode())
        if (
            entry is None
            or entry.mel.shape != mel.shape
            or not np.array_equal(entry.events, events)
        ):
            return None
        if not _close_mel(mel, entry.mel, self.tier.mel.log_floor):
            return None
        vocoder = {"vocoder": entry.start["vocoder"]}
        if not _close(state, vocoder, TEMPLATE_STATE_TOLERANCE):
            return None
        return Recalled(entry.audio, entry.events, {"vocoder": entry.end["vocoder"]}, template=True)

    def remember(
        self,
        window: Window,
        start: State,
        end: State,
        mel: np.ndarray,
        audio: np.ndarray,
        events: np.ndarray,
    ) -> None:
        """Keep a window synthesised from `start` (which ended in `end`)."""
        exact = self._exact_key(window)
        self.cache.set(exact, self._pack(_Entry(mel, audio, events, start, end)))
        if self.templates:
            self.cache.set(self._template_key(window.features), exact.encode())

    def _exact_key(self, window: Window) -> str:
        digest = hashlib.sha256()
        for features in (window.features, window.context):
            digest.update(len(features).to_bytes(4, "little"))
            digest.update(np.round(features / FEATURE_STEP).astype("<i4").tobytes())
        return f"win:{self._prefix}:{len(window.features)}:{digest.hexdigest()}"

    def _template_key(self, features: np.ndarray) -> str:
        bits = features.mean(axis=0) @ self._directions > 0
        return f"tpl:{self._prefix}:{len(features)}:{np.packbits(bits).tobytes().hex()}"

    def _pack(self, entry: _Entry) -> bytes:
        segments = [entry.mel.ravel(), entry.audio, entry.events.astype(np.float32)]
        for state in (entry.start, entry.end):
            for stage, shapes in self._shapes.items():
                for name in shapes:
                    segments += _sparse(state[stage][name])
        lengths = np.array([len(segments), *(len(s) for s in segments)], "<i4")
        payload = np.concatenate(segments).astype("<f4", copy=False)
        return lengths.tobytes() + payload.tobytes()

    def _load(self, key: str) -> _Entry | None:
        value = self.cache.get(key)
        if value is None:
            return None
        try:
            return self._unpack(value)
        except ValueError as exc:
            log.warning("window memo: unreadable value under %s (%s); recomputing", key, exc)
            return None

    def _unpack(self, value: bytes) -> _Entry:
        count = int(np.frombuffer(value, "<i4", 1)[0])
        tensors = sum(len(shapes) for shapes in self._shapes.values())
        if count != 3 + 4 * tensors or len(value) < 4 * (1 + count):
            raise ValueError(f"{count} segments, expected {3 + 4 * tensors}")
        lengths = np.frombuffer(value, "<i4", count, offset=4)
        payload = np.frombuffer(value, "<f4", offset=4 * (1 + count))
        if len(payload) != lengths.sum():
            raise ValueError(f"{len(payload)} values, the header says {lengths.sum()}")
        segments = np.split(payload, np.cumsum(lengths)[:-1])
        mel = segments[0].reshape(-1, self.tier.mel.n_mels)
        rest = iter(segments[3:])
        start, end = (self._state(rest) for _ in range(2))
        return _Entry(mel, segments[1], segments[2].astype(np.int64), start, end)

    def _state(self, segments: Iterator[np.ndarray]) -> State:
        return {
            stage: {name: _dense(next(segments), next(segments), shape) for name, shape in shapes}
            for stage, shapes in ((s, self._shapes[s].items()) for s in self._shapes)
        }


class FeatureCache:
    """Encoder features per frame (see the module docstring)."""

    def __init__(self, cache: Cache, tier: TierConfig) -> None:
        self.cache, self.dim = cache, tier.feature_dim
        self._prefix = f"feat:{LAYOUT}:{tier.name}:{tier.version}:{tier.digest}"

    def keys(
        self, rgb: np.ndarray, age: np.ndarray, previous: bytes | None
    ) -> tuple[list[str], bytes]:
        """Each frame's key, from the digest of the frame before the first (None: the stream's
        first frame, which stands for its own predecessor); also the last frame's digest."""
        keys = []
        for frame, a in zip(rgb, age.astype("<f4"), strict=True):
            digest = hashlib.sha256(np.ascontiguousarray(frame).data).digest()[:16]
            material = digest + (previous if previous is not None else b"first") + a.tobytes()
            keys.append(f"{self._prefix}:{hashlib.sha256(material).hexdigest()}")
            previous = digest
        assert previous is not None
        return keys, previous

    def get_many(self, keys: list[str]) -> list[np.ndarray | None]:
        """The features stored under `keys` (None where missing), in one cache round trip."""
        return [self._feature(value) for value in self.cache.get_many(keys)]

    def put_many(self, items: list[tuple[str, np.ndarray]]) -> None:
        self.cache.set_many([(key, f.astype("<f4").tobytes()) for key, f in items])

    def _feature(self, value: bytes | None) -> np.ndarray | None:
        if value is None or len(value) != 4 * self.dim:
            return None
        return np.frombuffer(value, "<f4").astype(np.float32)


def _shape(shape: list[int | str]) -> tuple[int, ...]:
    return tuple(1 if d == "B" else int(d) for d in shape)


def _sparse(x: np.ndarray) -> list[np.ndarray]:
    """A tensor as [its nonzero columns' indices, those columns], flat; a small one whole, as
    [[-1], all of it] (numpy's per-call cost would outweigh the bytes saved)."""
    if x.size < SPARSE_SIZE:
        return [_WHOLE, x.ravel()]
    rows = x.reshape(-1, x.shape[-1])
    columns = np.flatnonzero(np.any(rows != 0, axis=0))
    return [columns.astype(np.float32), rows[:, columns].ravel()]


def _dense(columns: np.ndarray, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape))
    if len(columns) == 1 and columns[0] < 0:
        if len(values) != size:
            raise ValueError(f"{len(values)} values for a tensor of shape {shape}")
        return values.reshape(shape)
    rows = np.zeros((size // shape[-1], shape[-1]), np.float32)
    index = columns.astype(np.int64)
    if len(index) and (index.max() >= shape[-1] or len(values) != rows.shape[0] * len(index)):
        raise ValueError(f"columns do not fit a tensor of shape {shape}")
    rows[:, index] = values.reshape(rows.shape[0], len(index))
    return rows.reshape(shape)


def _close_mel(mel: np.ndarray, stored: np.ndarray, log_floor: float) -> bool:
    """Amplitudes (log-mel power -> sqrt) within TEMPLATE_MEL_TOLERANCE of the stored window's
    loudest band; a quiet window's against 20 dB above the mel's floor instead, not its own
    near-floor peak."""
    amplitude, reference = np.exp(mel / 2), np.exp(stored / 2)
    scale = max(float(reference.max()), 10 * float(np.sqrt(log_floor)))
    return float(np.max(np.abs(amplitude - reference))) <= TEMPLATE_MEL_TOLERANCE * scale


def _close(state: State, stored: State, tolerance: float) -> bool:
    """Every tensor within `tolerance` x max(1, its stored largest magnitude)."""
    for stage, tensors in stored.items():
        for name, s in tensors.items():
            scale = max(1.0, float(np.max(np.abs(s), initial=0.0)))
            if np.max(np.abs(state[stage][name] - s), initial=0.0) > tolerance * scale:
                return False
    return True


def snapshot(state: State) -> State:
    """The generator and vocoder state as it is now. No copy: running a stage replaces its
    arrays, never writes into them (only a stream's first frames are written into the initial
    history, before any window)."""
    return {stage: dict(state[stage]) for stage in STAGES}
