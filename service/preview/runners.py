"""How the preview worker runs a tier's live streams, whatever its kind: frames at their own
timestamps in (each stream's frames of one batch together), audio at the tier's rate out, with
the samples where contact sounds start.

- `FrameRateRunner` (kind "frames"): each stream's frames mapped to the model's rate by
  timestamp, then every stage once for all streams of the batch (StreamRunner).
- `ContactRunner` (kind "contacts"): each stream's ContactSynth at its frames' own times, the
  localiser once for all streams of the batch.
- `MotionRunner` (kind "motion"): each stream's MotionSynth at its frames' own times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contacts.synth import ContactSynth, locate
from service.pipeline.contacts.tier import ContactTier
from service.pipeline.contract import TierConfig
from service.pipeline.motion.synth import MotionSynth
from service.pipeline.motion.tier import MotionTier
from service.pipeline.preprocess import FrameResampler
from service.pipeline.streaming import Stream, StreamRunner
from service.pipeline.tier import Tier
from service.pipeline.types import ContactMarker


@dataclass(frozen=True)
class LiveOnset:
    """A contact sound: the sample where it starts (from the stream's start) and what it is."""

    sample: int
    marker: ContactMarker


@dataclass(frozen=True)
class LiveChunk:
    """A stream's next audio (tier rate, following on from its last chunk) and the contact
    sounds that fired in it (samples at the tier rate)."""

    audio: np.ndarray
    onsets: list[LiveOnset]


class LiveRunner(Protocol):
    tier: Tier

    def open(self) -> object: ...

    def t0(self, stream: object) -> float | None: ...

    def frames(self, stream: object) -> int: ...

    def push(
        self, streams: list[object], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[LiveChunk]: ...

    def finish(self, streams: list[object], durations_s: list[float]) -> list[LiveChunk]: ...


def create_runner(
    tier: Tier,
    backend: Backend,
    *,
    static_threshold: float = 0.0,
) -> LiveRunner:
    if isinstance(tier, ContactTier):
        return ContactRunner(tier, backend)
    if isinstance(tier, MotionTier):
        return MotionRunner(tier, backend)
    return FrameRateRunner(tier, backend, static_threshold=static_threshold)


@dataclass
class _FrameStream:
    resampler: FrameResampler
    stream: Stream


class FrameRateRunner:
    def __init__(self, tier: TierConfig, backend: Backend, *, static_threshold: float) -> None:
        self.tier = tier
        # Static skip gives the same track whatever the push size, one frame included.
        self.runner = StreamRunner(tier, backend, static_threshold=static_threshold)

    def open(self) -> _FrameStream:
        return _FrameStream(FrameResampler(self.tier.fps), self.runner.open())

    def t0(self, stream: _FrameStream) -> float | None:
        return stream.resampler.t0

    def frames(self, stream: _FrameStream) -> int:
        return stream.stream.frames

    def push(
        self, streams: list[_FrameStream], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[LiveChunk]:
        model = [s.resampler.push(pts, rgb) for s, (pts, rgb) in zip(streams, frames, strict=True)]
        todo = [i for i, m in enumerate(model) if m is not None]
        chunks = self.runner.push([streams[i].stream for i in todo], [model[i] for i in todo])
        out = [LiveChunk(np.zeros(0, np.float32), [])] * len(streams)
        for i, chunk in zip(todo, chunks, strict=True):
            out[i] = self._live(chunk.audio, chunk.events)
        return out

    def finish(self, streams: list[_FrameStream], durations_s: list[float]) -> list[LiveChunk]:
        out = []
        for s, duration in zip(streams, durations_s, strict=True):
            rest = s.resampler.finish(self.tier.num_frames(duration))
            audio, events = [], []
            if rest is not None:
                (chunk,) = self.runner.push([s.stream], [rest])
                audio.append(chunk.audio)
                events.append(chunk.events)
            (chunk,) = self.runner.finish([s.stream])
            audio.append(chunk.audio)
            events.append(chunk.events)
            out.append(self._live(np.concatenate(audio), np.concatenate(events)))
        return out

    def _live(self, audio: np.ndarray, events: np.ndarray) -> LiveChunk:
        samples = [int(e) * self.tier.hop for e in events.tolist()]
        rate = self.tier.sample_rate
        return LiveChunk(audio, [LiveOnset(n, ContactMarker(n / rate)) for n in samples])


class ContactRunner:
    def __init__(self, tier: ContactTier, backend: Backend) -> None:
        self.tier, self.backend = tier, backend

    def open(self) -> ContactSynth:
        return ContactSynth(self.tier, self.backend)

    def t0(self, stream: ContactSynth) -> float | None:
        return stream.t0

    def frames(self, stream: ContactSynth) -> int:
        return stream.frames

    def push(
        self, streams: list[ContactSynth], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[LiveChunk]:
        """The localiser runs once for every stream's frames of the batch."""
        prepared = [s.prepare(*f) for s, f in zip(streams, frames, strict=True)]
        ready = [i for i, f in enumerate(prepared) if f is not None]
        found = locate(self.backend, [prepared[i] for i in ready]) if ready else []
        out = [LiveChunk(np.zeros(0, np.float32), [])] * len(streams)
        for i, objects in zip(ready, found, strict=True):
            synth, f = streams[i], prepared[i]
            out[i] = self._chunk(synth, lambda synth=synth, f=f, o=objects: synth.follow(f, o))
        return out

    def finish(self, streams: list[ContactSynth], durations_s: list[float]) -> list[LiveChunk]:
        return [
            self._chunk(s, lambda s=s, d=d: list(s.finish(d)))
            for s, d in zip(streams, durations_s, strict=True)
        ]

    def _chunk(self, synth: ContactSynth, run) -> LiveChunk:
        return events_chunk(synth, run, self.tier.sample_rate)


class MotionRunner:
    def __init__(self, tier: MotionTier, backend: Backend) -> None:
        self.tier, self.backend = tier, backend

    def open(self) -> MotionSynth:
        return MotionSynth(self.tier, self.backend)

    def t0(self, stream: MotionSynth) -> float | None:
        return stream.t0

    def frames(self, stream: MotionSynth) -> int:
        return stream.frames

    def push(
        self, streams: list[MotionSynth], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[LiveChunk]:
        rate = self.tier.sample_rate
        return [
            events_chunk(s, lambda s=s, f=f: list(s.push(*f)), rate)
            for s, f in zip(streams, frames, strict=True)
        ]

    def finish(self, streams: list[MotionSynth], durations_s: list[float]) -> list[LiveChunk]:
        rate = self.tier.sample_rate
        return [
            events_chunk(s, lambda s=s, d=d: list(s.finish(d)), rate)
            for s, d in zip(streams, durations_s, strict=True)
        ]


def events_chunk(synth: ContactSynth | MotionSynth, run, rate: int) -> LiveChunk:
    """The audio `run` makes and the onsets inside it: an event is decided before its samples
    are final, so its onset goes out with the chunk that holds its first sample."""
    start = synth.renderer.taken
    marked = len(synth.layer.markers) if isinstance(synth, MotionSynth) else 0
    audio = list(run())  # a live stream's gaps are bounded (protocol.MAX_FRAME_GAP_S)
    end = synth.renderer.taken
    onsets = [
        LiveOnset(n, synth.marker_of(f.event))
        for f, n in ((f, int(np.ceil(f.event.time_s * rate - 1e-9))) for f in synth.fired[-64:])
        if start <= n < end
    ]
    if isinstance(synth, MotionSynth):  # rolling and sliding: made once their kind is known
        onsets += [
            LiveOnset(int(np.ceil(m.time_s * rate - 1e-9)), m) for m in synth.layer.markers[marked:]
        ]
    onsets.sort(key=lambda o: o.sample)
    return LiveChunk(np.concatenate([np.zeros(0, np.float32), *audio]), onsets)
