"""How a tier's streams run, whatever its kind: frames at their own timestamps in, audio at the
tier's rate out, with the samples where contact sounds start. One runner serves a file render
(one stream, a decoded batch per push) and the live preview (many streams, a frame or a few
each per push): the offline path is the live runner over a whole file.

- `FrameRateRunner` (kind "frames"): each stream's frames mapped to the model's rate by
  timestamp, then every stage once for all streams of the batch (StreamRunner).
- `ContactRunner` (kind "contacts"): each stream's ContactSynth at its frames' own times, the
  localiser once for all streams of the batch.
- `MotionRunner` (kind "motion"): each stream's MotionSynth at its frames' own times.

`push` and `finish` take the frames at once and give the audio lazily, in rounds: each round an
`Piece` per stream of at most a second of audio (or 64 model frames' worth), so a long gap
between two frames of a file is never held in memory at once. Exhaust the rounds before the
next call; `gather` joins them (a live stream's gaps are bounded: protocol.MAX_FRAME_GAP_S).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contacts.render import first_sample
from service.pipeline.contacts.synth import ContactSynth, locate
from service.pipeline.contacts.tier import ContactTier
from service.pipeline.contract import EventTier, TierConfig
from service.pipeline.event_stream import EventStream
from service.pipeline.motion.synth import MotionSynth, measured
from service.pipeline.motion.tier import MotionTier
from service.pipeline.preprocess import FrameResampler, ModelFrames
from service.pipeline.streaming import Chunk, Memo, StageTimer, Stream, StreamRunner
from service.pipeline.tier import Tier
from service.pipeline.types import ContactMarker, ReuseStats


@dataclass(frozen=True)
class Onset:
    """A contact sound: the sample where it starts (from the stream's start) and what it is."""

    sample: int
    marker: ContactMarker


@dataclass(frozen=True)
class Piece:
    """A stream's next audio (tier rate, following on from its last output) and the contact
    sounds that start in it (samples at the tier rate)."""

    audio: np.ndarray
    onsets: list[Onset]


NOTHING = Piece(np.zeros(0, np.float32), [])
Rounds = Iterator[list[Piece]]
StreamT = TypeVar("StreamT")  # a runner's own kind of stream
AnyEventStream = EventStream[Any, Any]
EventTierT = TypeVar("EventTierT", bound=EventTier)


class Runner(Protocol[StreamT]):
    @property
    def tier(self) -> Tier: ...

    @property
    def reuse(self) -> ReuseStats:
        """What its caches saved, over all its streams."""
        ...

    def open(self) -> StreamT: ...

    def t0(self, stream: StreamT) -> float | None:
        """The stream's first frame's time (None before any)."""
        ...

    def frames(self, stream: StreamT) -> int: ...

    def markers(self, stream: StreamT) -> tuple[ContactMarker, ...]:
        """The stream's contacts so far, in time order, as a timeline sees them."""
        ...

    def push(self, streams: list[StreamT], frames: list[tuple[np.ndarray, np.ndarray]]) -> Rounds:
        """Each stream's next frames (pts s, rgb at the tier's size; `t0` is known on return)."""
        ...

    def finish(self, streams: list[StreamT], durations_s: list[float]) -> Rounds:
        """Each stream's rest: its track ends `durations_s` after its first frame."""
        ...


def create_runner(
    tier: Tier,
    backend: Backend,
    *,
    timer: StageTimer | None = None,
    static_threshold: float = 0.0,
    memo: Memo | None = None,
) -> Runner[Any]:
    """The runner of `tier`'s kind. `static_threshold` and `memo` are the frame-rate kind's
    caches (service.pipeline.streaming); the other kinds keep none."""
    timer = timer or StageTimer()
    if isinstance(tier, ContactTier):
        return ContactRunner(tier, backend, timer)
    if isinstance(tier, MotionTier):
        return MotionRunner(tier, backend, timer)
    assert isinstance(tier, TierConfig)
    return FrameRateRunner(tier, backend, timer, static_threshold=static_threshold, memo=memo)


def gather(rounds: Rounds, streams: int) -> list[Piece]:
    """Each stream's rounds joined into one output."""
    audio: list[list[np.ndarray]] = [[] for _ in range(streams)]
    onsets: list[list[Onset]] = [[] for _ in range(streams)]
    for outputs in rounds:
        for i, out in enumerate(outputs):
            audio[i].append(out.audio)
            onsets[i] += out.onsets
    return [
        Piece(np.concatenate([np.zeros(0, np.float32), *a]), o)
        for a, o in zip(audio, onsets, strict=True)
    ]


@dataclass
class FrameStream:
    resampler: FrameResampler
    stream: Stream
    events: list[int] = field(default_factory=list)  # acoustic frames where sounds fired


class FrameRateRunner:
    def __init__(
        self,
        tier: TierConfig,
        backend: Backend,
        timer: StageTimer,
        *,
        static_threshold: float = 0.0,
        memo: Memo | None = None,
    ) -> None:
        self.tier = tier
        # Static skip gives the same track whatever the push size, one frame included; the memo
        # lags the frames by a few, for file renders.
        self.runner = StreamRunner(
            tier, backend, timer=timer, static_threshold=static_threshold, memo=memo
        )
        self.reuse = self.runner.reuse

    def open(self) -> FrameStream:
        return FrameStream(FrameResampler(self.tier.fps), self.runner.open())

    def t0(self, stream: FrameStream) -> float | None:
        return stream.resampler.t0

    def frames(self, stream: FrameStream) -> int:
        return stream.stream.frames

    def markers(self, stream: FrameStream) -> tuple[ContactMarker, ...]:
        # The generator tells when, not how hard or what material.
        return tuple(ContactMarker(self._seconds(e)) for e in stream.events)

    def push(
        self, streams: list[FrameStream], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> Rounds:
        pieces = [s.resampler.chunks(*f) for s, f in zip(streams, frames, strict=True)]
        return self._rounds(streams, pieces)

    def finish(self, streams: list[FrameStream], durations_s: list[float]) -> Rounds:
        tier = self.tier
        rest = [
            s.resampler.finish_chunks(tier.num_frames(d))
            for s, d in zip(streams, durations_s, strict=True)
        ]
        yield from self._rounds(streams, rest)
        chunks = self.runner.finish([s.stream for s in streams])
        # Only the last frame can be partial, and it comes out here.
        yield [
            self._output(s, replace(c, audio=c.audio[: max(0, tier.num_samples(d) - c.start)]))
            for s, c, d in zip(streams, chunks, durations_s, strict=True)
        ]

    def _rounds(self, streams: list[FrameStream], pieces: list[Iterator[ModelFrames]]) -> Rounds:
        while True:
            model = [next(p, None) for p in pieces]
            todo = [(i, m) for i, m in enumerate(model) if m is not None]
            if not todo:
                return
            chunks = self.runner.push([streams[i].stream for i, _ in todo], [m for _, m in todo])
            out = [NOTHING] * len(streams)
            for (i, _), chunk in zip(todo, chunks, strict=True):
                out[i] = self._output(streams[i], chunk)
            yield out

    def _output(self, stream: FrameStream, chunk: Chunk) -> Piece:
        events = chunk.events.tolist()
        stream.events += events
        onsets = [Onset(e * self.tier.hop, ContactMarker(self._seconds(e))) for e in events]
        return Piece(chunk.audio, onsets)

    def _seconds(self, event: int) -> float:
        return int(event) * self.tier.hop / self.tier.sample_rate


class _EventRunner(Generic[EventTierT]):
    """The kinds whose streams place each event on its sample (service.pipeline.event_stream)."""

    def __init__(self, tier: EventTierT, backend: Backend, timer: StageTimer) -> None:
        self.tier, self.backend, self.timer = tier, backend, timer
        self.reuse = ReuseStats()  # these kinds keep no caches: always none

    def t0(self, stream: AnyEventStream) -> float | None:
        return stream.t0

    def frames(self, stream: AnyEventStream) -> int:
        return stream.frames

    def markers(self, stream: AnyEventStream) -> tuple[ContactMarker, ...]:
        return stream.markers

    def finish(self, streams: Sequence[AnyEventStream], durations_s: list[float]) -> Rounds:
        glides = [len(s.glide_markers) for s in streams]
        audio = [s.finish(d) for s, d in zip(streams, durations_s, strict=True)]
        return self._rounds(streams, audio, glides)

    def _rounds(
        self,
        streams: Sequence[AnyEventStream],
        audio: list[Iterator[np.ndarray]],
        sent: list[int],
    ) -> Rounds:
        """`sent`: each stream's rolling and sliding markers made before it ran."""
        while True:
            out = []
            for i, (synth, rest) in enumerate(zip(streams, audio, strict=True)):
                piece, sent[i] = self._piece(synth, rest, sent[i])
                out.append(piece)
            if all(o is None for o in out):
                return
            yield [NOTHING if o is None else o for o in out]

    def _piece(
        self, synth: AnyEventStream, audio: Iterator[np.ndarray], sent: int
    ) -> tuple[Piece | None, int]:
        """The stream's next piece of audio and the onsets inside it: an event is decided
        before its samples are final, so its onset goes out with the piece that holds its first
        sample; a glide's once its kind is known."""
        start = synth.renderer.taken
        piece = next(audio, None)
        if piece is None:
            return None, sent
        end, rate = synth.renderer.taken, self.tier.sample_rate
        onsets = [
            Onset(n, synth.marker_of(f.event))
            for f, n in ((f, first_sample(f.event.time_s, rate)) for f in synth.fired[-64:])
            if start <= n < end
        ]
        made = synth.glide_markers[sent:]
        sent += len(made)
        onsets += [Onset(first_sample(m.time_s, rate), m) for m in made]
        onsets.sort(key=lambda o: o.sample)
        return Piece(piece, onsets), sent


class ContactRunner(_EventRunner[ContactTier]):
    def open(self) -> ContactSynth:
        return ContactSynth(self.tier, self.backend, timer=self.timer)

    def push(
        self, streams: list[ContactSynth], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> Rounds:
        """The localiser runs once for every stream's frames of the batch."""
        glides = [len(s.glide_markers) for s in streams]
        prepared = [s.prepare(*f) for s, f in zip(streams, frames, strict=True)]
        ready = [(i, f) for i, f in enumerate(prepared) if f is not None]
        with self.timer("localiser"):
            found = locate(self.backend, [f for _, f in ready]) if ready else []
        audio: list[Iterator[np.ndarray]] = [iter(())] * len(streams)
        for (i, f), objects in zip(ready, found, strict=True):
            audio[i] = streams[i].follow(f, objects)
        return self._rounds(streams, audio, glides)


class MotionRunner(_EventRunner[MotionTier]):
    def open(self) -> MotionSynth:
        return MotionSynth(self.tier, self.backend, timer=self.timer)

    def push(
        self, streams: list[MotionSynth], frames: list[tuple[np.ndarray, np.ndarray]]
    ) -> Rounds:
        """Every stream's frames are observed first, so that their flow is measured at once
        while each stream's head reads the frames before."""
        glides = [len(s.glide_markers) for s in streams]
        observed = [s.observe(*f) for s, f in zip(streams, frames, strict=True)]
        intervals = measured([o for seen in observed for o in seen], self.timer)
        audio = [
            s.take(seen, itertools.islice(intervals, len(seen)))
            for s, seen in zip(streams, observed, strict=True)
        ]
        return self._rounds(streams, audio, glides)
