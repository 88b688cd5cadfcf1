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


class StreamingSynth:
    """Feed `ModelFrames` in order with `push`, then `finish`; both yield audio chunks in order.

    Not thread-safe: one instance per stream.
    """

    def __init__(self, tier: TierConfig, backend: Backend, *, timer: StageTimer | None = None):
        self.tier, self.backend = tier, backend
        self.timer = timer or StageTimer()
        self._state = {stage.name: initial_state(stage) for stage in tier.stages}
        self._lookahead = tier.generator.right_context
        self._frames = 0  # frames pushed
        self._samples = 0  # samples yielded

    def push(self, frames: ModelFrames) -> Iterator[np.ndarray]:
        if frames.start != self._frames:
            raise ValueError(f"frames start at {frames.start}, expected {self._frames}")
        with self.timer("preprocess"):
            pixels = to_model_input(frames.rgb)[None]
        with self.timer("encoder"):
            features = self._run("encoder", {"frames": pixels, "age": frames.age[None]})["features"]
        primed = min(self._frames, self._lookahead)
        self._frames += len(frames)
        prime = features[:, : self._lookahead - primed]
        if prime.shape[1]:
            # The first frames the generator looks ahead to go into its history (the contract).
            history = self._state["generator"]["history"]
            end = history.shape[1] - self._lookahead + primed + prime.shape[1]
            history[:, end - prime.shape[1] : end] = prime
        rest = features[:, prime.shape[1] :]
        if rest.shape[1]:
            yield self._synthesize(rest)

    def finish(self, num_frames: int, num_samples: int) -> Iterator[np.ndarray]:
        """Flush the last frames; the track ends at `num_samples` (the video's duration)."""
        if self._frames != num_frames:
            raise ValueError(f"{self._frames} frames pushed, clip has {num_frames}")
        padding = min(self._frames, self._lookahead)
        if padding:  # only the last frame can be partial, and it comes out here
            before = self._samples
            audio = self._synthesize(np.zeros((1, padding, self.tier.feature_dim), np.float32))
            yield audio[: max(0, num_samples - before)]

    def _synthesize(self, features: np.ndarray) -> np.ndarray:
        with self.timer("generator"):
            mel = self._run("generator", {"features": features})["mel"]
        with self.timer("vocoder"):
            audio = self._run("vocoder", {"mel": mel})["audio"][0]
        self._samples += len(audio)
        return audio

    def _run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        state = self._state[stage]
        out = self.backend.run(stage, inputs | {f"state_{k}": v for k, v in state.items()})
        self._state[stage] = {k: out.pop(f"next_{k}") for k in state}
        return out


def synthesize_clip(
    frames: ModelFrames, *, tier: TierConfig, backend: Backend, num_samples: int | None = None
) -> np.ndarray:
    """A whole clip in one push: the reference any chunking must equal."""
    if num_samples is None:
        num_samples = len(frames) * tier.samples_per_frame
    synth = StreamingSynth(tier, backend)
    return np.concatenate([*synth.push(frames), *synth.finish(len(frames), num_samples)])
