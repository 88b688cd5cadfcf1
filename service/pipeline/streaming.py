"""Model frames in, the Foley track out, chunk by chunk: every stage carries its state from one
call to the next (the stage contract in service.pipeline.contract), so the track is the same
however the frames are cut into chunks, no work is done twice, and memory does not grow with the
clip. A whole clip (`foley generate`) and a live stream (one frame at a time) run the same code.

The generator looks one frame ahead: the audio of frame k comes out when frame k + 1 goes in, and
`finish` flushes the last frame with the zero padding that stands for "after the clip".

Two reuses are opt-in per runner, both off by default (the encoder, generator and vocoder calls,
hence the track, are then exactly those of a runner without them):
- `static_threshold` > 0: static frames skip the encoder (service.pipeline.static); the same in
  any chunking, so a live stream may use it;
- `memo`: the generator and vocoder run on content-defined windows (service.pipeline.windows),
  each looked up in a window memo first (and, with templates, its vocoder part after the
  generator), and the encoder's features are looked up per frame (service.pipeline.memo).
  Windows lag the frames by a few frames: for offline renders.
What was reused is counted in the runner's `reuse` (service.pipeline.types.ReuseStats).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from service.pipeline import static
from service.pipeline.backends.base import Backend
from service.pipeline.contract import StageSpec, TierConfig
from service.pipeline.memo import FeatureCache, WindowMemo, snapshot
from service.pipeline.preprocess import ModelFrames, to_model_input
from service.pipeline.types import ReuseStats
from service.pipeline.windows import Window, WindowCutter, context_frames


class StageTimer:
    """Seconds spent per stage, summed over a render (stages that run in threads side by
    side overlap: their sum may pass the render's time). Thread-safe."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - start
            with self._lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + took


def initial_state(stage: StageSpec, batch: int = 1) -> dict[str, np.ndarray]:
    """A stream's starting state: zeros of the contract's shapes."""
    return {
        name: np.zeros([batch if d == "B" else int(d) for d in shape], np.float32)
        for name, shape in stage.state.items()
    }


@dataclass
class Stream:
    """One stream's place and its stages' state (a batch of one)."""

    state: dict[str, dict[str, np.ndarray]]
    frames: int = 0  # model frames pushed
    samples: int = 0  # samples produced
    encoder: static.EncoderTrack = field(default_factory=static.EncoderTrack)
    windows: WindowCutter | None = None  # memo only
    digest: bytes | None = None  # the last frame's, for the feature cache


@dataclass(frozen=True)
class Chunk:
    """What one push gives one stream: samples from `start` on (at the model's rate, from the
    stream's first frame), and the acoustic frames (same origin) where contact sounds fire."""

    start: int
    audio: np.ndarray
    events: np.ndarray


@dataclass(frozen=True)
class Memo:
    """The window memo and the feature cache a runner looks in (service.pipeline.memo)."""

    windows: WindowMemo
    features: FeatureCache


class StreamRunner:
    """Runs the stages for several streams at once: one call per stage for all streams given the
    same number of frames (or, static frames skipped, the same number of encoder frames), each
    stream with its own state. Holds no stream itself; counts what it reused in `reuse`.

    Not thread-safe: one thread drives a runner (its timer and counters are not locked).
    """

    def __init__(
        self,
        tier: TierConfig,
        backend: Backend,
        *,
        timer: StageTimer | None = None,
        static_threshold: float = 0.0,
        memo: Memo | None = None,
    ):
        self.tier, self.backend = tier, backend
        self.timer = timer or StageTimer()
        self.lookahead = tier.generator.right_context
        self.static_threshold, self.memo = static_threshold, memo
        self.reuse = ReuseStats()

    def open(self) -> Stream:
        stream = Stream({stage.name: initial_state(stage) for stage in self.tier.stages})
        if self.memo is not None:
            stream.windows = WindowCutter(context_frames(self.tier))
        return stream

    def push(self, streams: list[Stream], frames: list[ModelFrames]) -> list[Chunk]:
        """The next model frames of each stream -> each stream's new audio (possibly none yet:
        the generator looks `lookahead` frames ahead)."""
        for stream, f in zip(streams, frames, strict=True):
            if f.start != stream.frames:
                raise ValueError(f"frames start at {f.start}, expected {stream.frames}")
        features = self._encode(streams, frames)
        rest = [self._prime(s, f) for s, f in zip(streams, features, strict=True)]
        for stream, f in zip(streams, frames, strict=True):
            stream.frames += len(f)
            self.reuse.frames += len(f)
        return self._synthesize(streams, rest)

    def _encode(self, streams: list[Stream], frames: list[ModelFrames]) -> list[np.ndarray]:
        """Each stream's features: the encoder runs once per group of streams with as many
        frames to encode, on the frames `static.plan` leaves it."""
        with self.timer("preprocess"):
            keyed = [self._plan(s, f) for s, f in zip(streams, frames, strict=True)]
        plans = [plan for plan, _ in keyed]
        outputs = [np.empty((0, self.tier.feature_dim), np.float32)] * len(streams)
        for group in _by_length([len(p.run) for p in plans]):
            if not len(plans[group[0]].run):
                continue
            with self.timer("preprocess"):
                inputs = [
                    static.encoder_input(streams[i].encoder, frames[i], plans[i]) for i in group
                ]
                pixels = np.stack([to_model_input(rgb) for rgb, _ in inputs])
                age = np.stack([a for _, a in inputs]).astype(np.float32)
            with self.timer("encoder"):
                out = self._run(
                    "encoder", [streams[i] for i in group], {"frames": pixels, "age": age}
                )
            for row, i in enumerate(group):
                outputs[i] = out["features"][row]
        features = []
        for stream, f, (plan, keys), encoded in zip(streams, frames, keyed, outputs, strict=True):
            feature = static.assemble(plan, encoded, self.tier.feature_dim)
            static.advance(stream.encoder, f.rgb, plan, feature)
            if self.memo is not None:
                kept = plan.run[plan.keep].tolist()
                self.memo.features.put_many([(keys[i], feature[i]) for i in kept])
            self.reuse.frames_static += int(np.sum(plan.modes == static.STATIC))
            self.reuse.frames_known += len(plan.known)
            features.append(feature)
        return features

    def _plan(self, stream: Stream, frames: ModelFrames) -> tuple[static.EncoderPlan, list[str]]:
        """The stream's encoder plan, and its frames' feature-cache keys (memo only)."""
        if self.memo is None or not len(frames):
            plan = static.plan(
                stream.encoder, frames.rgb, frames.age, threshold=self.static_threshold
            )
            return plan, []
        cache = self.memo.features
        keys, stream.digest = cache.keys(frames.rgb, frames.age, stream.digest)
        found = cache.get_many(keys)  # one round trip per push, not per frame

        def lookup(i: int) -> np.ndarray | None:
            return found[i]

        plan = static.plan(
            stream.encoder, frames.rgb, frames.age, threshold=self.static_threshold, lookup=lookup
        )
        return plan, keys

    def finish(self, streams: list[Stream]) -> list[Chunk]:
        """Each stream's last frames: the generator's lookahead filled with the zero padding
        that stands for "after the clip"."""
        pad = [
            np.zeros((min(s.frames, self.lookahead), self.tier.feature_dim), np.float32)
            for s in streams
        ]
        return self._synthesize(streams, pad, final=True)

    def _prime(self, stream: Stream, features: np.ndarray) -> np.ndarray:
        """Write the stream's first `lookahead` features into the generator's history (the
        stream contract); returns the features left to synthesise."""
        primed = min(stream.frames, self.lookahead)
        prime = features[: self.lookahead - primed]
        if len(prime):
            history = stream.state["generator"]["history"]
            end = history.shape[1] - self.lookahead + primed + len(prime)
            history[0, end - len(prime) : end] = prime
            if stream.windows is not None:
                stream.windows.prime(prime)
        return features[len(prime) :]

    def _synthesize(
        self, streams: list[Stream], features: list[np.ndarray], *, final: bool = False
    ) -> list[Chunk]:
        if self.memo is not None:
            pairs = zip(streams, features, strict=True)
            return [self._windows(s, f, final=final) for s, f in pairs]
        chunks = [Chunk(s.samples, np.zeros(0, np.float32), np.zeros(0, np.int64)) for s in streams]
        for group in _by_length([len(f) for f in features]):
            if not len(features[group[0]]):
                continue
            batch = [streams[i] for i in group]
            audio, events = self._generate(batch, np.stack([features[i] for i in group]))
            for row, i in enumerate(group):
                chunks[i] = self._emit(streams[i], audio[row], np.flatnonzero(events[row]))
        return chunks

    def _generate(
        self, streams: list[Stream], features: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Generator and vocoder on features (B, T, D) -> audio (B, S), events (B, M) bool."""
        with self.timer("generator"):
            out = self._run("generator", streams, {"features": features})
        with self.timer("vocoder"):
            audio = self._run("vocoder", streams, {"mel": out["mel"]})["audio"]
        return audio, out["events"] > 0.5

    def _emit(self, stream: Stream, audio: np.ndarray, events: np.ndarray) -> Chunk:
        """A chunk of the stream's next audio; `events` in acoustic frames from its start."""
        chunk = Chunk(stream.samples, audio, stream.samples // self.tier.hop + events)
        stream.samples += len(audio)
        return chunk

    def _windows(self, stream: Stream, features: np.ndarray, *, final: bool) -> Chunk:
        """The memo's path: the stream's features cut into windows, each recalled or made."""
        assert stream.windows is not None, "a stream opened by a runner without a memo"
        windows = stream.windows.push(features)
        if final:
            windows += stream.windows.finish()
        chunks = [self._emit(stream, *self._window(stream, w)) for w in windows]
        if not chunks:
            return Chunk(stream.samples, np.zeros(0, np.float32), np.zeros(0, np.int64))
        return Chunk(
            chunks[0].start,
            np.concatenate([c.audio for c in chunks]),
            np.concatenate([c.events for c in chunks]),
        )

    def _window(self, stream: Stream, window: Window) -> tuple[np.ndarray, np.ndarray]:
        """One window's audio and events (acoustic frames from its start): recalled whole,
        or generated and, with templates, the vocoder's part recalled."""
        assert self.memo is not None
        memo = self.memo.windows
        self.reuse.windows += 1
        with self.timer("memo"):
            recalled = memo.recall(window, stream.state)
        if recalled is not None:
            self.reuse.windows_exact += 1
            stream.state.update(recalled.end)
            return recalled.audio, recalled.events
        start = snapshot(stream.state)
        with self.timer("generator"):
            out = self._run("generator", [stream], {"features": window.features[None]})
        mel, events = out["mel"][0], np.flatnonzero(out["events"][0] > 0.5)
        if memo.templates:
            with self.timer("memo"):
                recalled = memo.recall_template(window, mel, events, stream.state)
            if recalled is not None:
                self.reuse.windows_template += 1
                stream.state.update(recalled.end)
                return recalled.audio, events
        with self.timer("vocoder"):
            audio = self._run("vocoder", [stream], {"mel": out["mel"]})["audio"][0]
        with self.timer("memo"):
            memo.remember(window, start, snapshot(stream.state), mel, audio, events)
        self.reuse.frames_recomputed += len(window.features)
        return audio, events

    def _run(
        self, stage: str, streams: list[Stream], inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        names = list(streams[0].state[stage])
        state = {f"state_{k}": np.concatenate([s.state[stage][k] for s in streams]) for k in names}
        out = self.backend.run(stage, inputs | state)
        for row, stream in enumerate(streams):
            stream.state[stage] = {k: out[f"next_{k}"][row : row + 1] for k in names}
        return out


def _by_length(lengths: list[int]) -> list[list[int]]:
    """Indices grouped by equal length, in order of first appearance."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    return list(groups.values())


def synthesize_clip(
    frames: ModelFrames, *, tier: TierConfig, backend: Backend, num_samples: int | None = None
) -> np.ndarray:
    """A whole clip in one push: the reference any chunking must equal. The track ends at
    `num_samples` (only the last frame can be partial)."""
    runner = StreamRunner(tier, backend)
    stream = runner.open()
    (chunk,) = runner.push([stream], [frames])
    (last,) = runner.finish([stream])
    return np.concatenate([chunk.audio, last.audio])[:num_samples]
