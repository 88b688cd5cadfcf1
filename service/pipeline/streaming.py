"""Model frames in, the Foley track out, chunk by chunk: every stage carries its state from one
call to the next (the stage contract in service.pipeline.contract), so the track is the same
however the frames are cut into chunks, no work is done twice, and memory does not grow with the
clip. A whole clip (`foley generate`) and a live stream (one frame at a time) run the same code.

The generator looks one frame ahead: the audio of frame k comes out when frame k + 1 goes in, and
`finish` flushes the last frame with the zero padding that stands for "after the clip".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contract import StageSpec, TierConfig
from service.pipeline.preprocess import ModelFrames, to_model_input


class StageTimer:
    """Seconds spent per stage, summed over a render."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


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


@dataclass(frozen=True)
class Chunk:
    """What one push gives one stream: samples from `start` on (at the model's rate, from the
    stream's first frame), and the acoustic frames (same origin) where contact sounds fire."""

    start: int
    audio: np.ndarray
    events: np.ndarray


class StreamRunner:
    """Runs the stages for several streams at once: one call per stage for all streams given the
    same number of frames, each stream with its own state. Holds no stream itself.

    Not thread-safe: one thread drives a runner (its timer is not locked).
    """

    def __init__(self, tier: TierConfig, backend: Backend, *, timer: StageTimer | None = None):
        self.tier, self.backend = tier, backend
        self.timer = timer or StageTimer()
        self.lookahead = tier.generator.right_context

    def open(self) -> Stream:
        return Stream({stage.name: initial_state(stage) for stage in self.tier.stages})

    def push(self, streams: list[Stream], frames: list[ModelFrames]) -> list[Chunk]:
        """The next model frames of each stream -> each stream's new audio (possibly none yet:
        the generator looks `lookahead` frames ahead)."""
        for stream, f in zip(streams, frames, strict=True):
            if f.start != stream.frames:
                raise ValueError(f"frames start at {f.start}, expected {stream.frames}")
        features: list[np.ndarray] = [np.empty(0)] * len(streams)
        for group in _by_length([len(f) for f in frames]):
            with self.timer("preprocess"):
                pixels = np.stack([to_model_input(frames[i].rgb) for i in group])
                age = np.stack([frames[i].age for i in group]).astype(np.float32)
            with self.timer("encoder"):
                out = self._run(
                    "encoder", [streams[i] for i in group], {"frames": pixels, "age": age}
                )
            for row, i in enumerate(group):
                features[i] = out["features"][row]
        rest = [self._prime(s, f) for s, f in zip(streams, features, strict=True)]
        for stream, f in zip(streams, frames, strict=True):
            stream.frames += len(f)
        return self._synthesize(streams, rest)

    def finish(self, streams: list[Stream]) -> list[Chunk]:
        """Each stream's last frames: the generator's lookahead filled with the zero padding
        that stands for "after the clip"."""
        pad = [
            np.zeros((min(s.frames, self.lookahead), self.tier.feature_dim), np.float32)
            for s in streams
        ]
        return self._synthesize(streams, pad)

    def _prime(self, stream: Stream, features: np.ndarray) -> np.ndarray:
        """Write the stream's first `lookahead` features into the generator's history (the
        stream contract); returns the features left to synthesise."""
        primed = min(stream.frames, self.lookahead)
        prime = features[: self.lookahead - primed]
        if len(prime):
            history = stream.state["generator"]["history"]
            end = history.shape[1] - self.lookahead + primed + len(prime)
            history[0, end - len(prime) : end] = prime
        return features[len(prime) :]

    def _synthesize(self, streams: list[Stream], features: list[np.ndarray]) -> list[Chunk]:
        hop = self.tier.hop
        chunks = [Chunk(s.samples, np.zeros(0, np.float32), np.zeros(0, np.int64)) for s in streams]
        for group in _by_length([len(f) for f in features]):
            if not len(features[group[0]]):
                continue
            batch = [streams[i] for i in group]
            with self.timer("generator"):
                out = self._run(
                    "generator", batch, {"features": np.stack([features[i] for i in group])}
                )
            with self.timer("vocoder"):
                audio = self._run("vocoder", batch, {"mel": out["mel"]})["audio"]
            for row, i in enumerate(group):
                stream = streams[i]
                first_frame = stream.samples // hop
                events = first_frame + np.flatnonzero(out["events"][row] > 0.5)
                chunks[i] = Chunk(stream.samples, audio[row], events)
                stream.samples += audio.shape[1]
        return chunks

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


class StreamingSynth:
    """One stream: feed `ModelFrames` in order with `push`, then `finish`; both yield audio
    chunks in order.

    Not thread-safe: one instance per stream.
    """

    def __init__(self, tier: TierConfig, backend: Backend, *, timer: StageTimer | None = None):
        self.runner = StreamRunner(tier, backend, timer=timer)
        self.stream = self.runner.open()

    def push(self, frames: ModelFrames) -> Iterator[np.ndarray]:
        (chunk,) = self.runner.push([self.stream], [frames])
        if len(chunk.audio):
            yield chunk.audio

    def finish(self, num_frames: int, num_samples: int) -> Iterator[np.ndarray]:
        """Flush the last frames; the track ends at `num_samples` (the video's duration)."""
        if self.stream.frames != num_frames:
            raise ValueError(f"{self.stream.frames} frames pushed, clip has {num_frames}")
        (chunk,) = self.runner.finish([self.stream])
        # Only the last frame can be partial, and it comes out here.
        yield chunk.audio[: max(0, num_samples - chunk.start)]


def synthesize_clip(
    frames: ModelFrames, *, tier: TierConfig, backend: Backend, num_samples: int | None = None
) -> np.ndarray:
    """A whole clip in one push: the reference any chunking must equal."""
    if num_samples is None:
        num_samples = len(frames) * tier.samples_per_frame
    synth = StreamingSynth(tier, backend)
    return np.concatenate([*synth.push(frames), *synth.finish(len(frames), num_samples)])
