"""Contact events -> audio, with each attack on its sample.

An event (time, impulse, material, size) sounds as its material's voice moved to its size:
damped sinusoids (the modes) and a short noise click, all starting at the event's exact time,
sub-sample phase included, the way the simulator's sound model makes an impact
(engines.audio.modal). Level is the material's loudness times impulse ** impulse_exponent (a
harder hit is louder, in every clip); hardness (contact_ms) low-passes the modes and the click,
so rubber thuds and steel clicks. Size: the voices hold the modes of an object of voice_size_m;
an event's own size moves them (half the size: twice the pitch, a shorter ring).

Contact damping: an object touching down again is pressed against what it hits, which takes
energy out of the vibration it still carries, so a new event of the same source (the track it
came from) damps that source's rings from its attack on, to CONTACT_DAMPING within DAMP_S. A
bouncing metal object is heard as a run of strikes, not as one ring growing louder, which
repeated impacts summed on one undamped resonator would make.

A continuous layer (`layer`: rolling and sliding, service.pipeline.motion.layer) is mixed in
before the limiter.

Streaming: `add` an event once it is decided, `take(n)` the next n samples. The renderer keeps
the not-yet-taken part of the rings it has started (at most max_ring_s long), so memory is
bounded whatever the clip's length. The sound of an event depends only on the event and its
index in the stream (the click's noise), so the track is the same however the clip is chunked,
provided events are added before the samples they start on are taken (`add` refuses otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.pipeline.contacts.tier import RendererSpec, Voice
from service.pipeline.streaming import StageTimer

LIMIT_KNEE = 0.9
LIMIT_CEILING = 0.99  # < 1 even after float32 rounding, which tanh(large) = 1.0 would not be
CLICK_FLOOR_S = 3e-4
CONTACT_DAMPING = 0.3  # amplitude left of a source's rings once it touches down again
DAMP_S = 0.003
# A voice's modes are those of an object of the spec's voice_size_m; another size scales them as
# the simulator's sound model does (engines.audio.modal): pitch ~ 1 / size, ring time ~ size^0.4.
RING_SIZE_EXPONENT = 0.4
MAX_MODE_HZ = 18_000.0
SIZE_RANGE_M = (0.02, 1.0)  # an estimate outside is clamped: every voice keeps an audible mode


@dataclass(frozen=True)
class Event:
    """A contact sound: time in seconds from the first frame, impulse (N s), material index
    (the tier's material order), the object that sounds (`source`: a track id; -1 for
    none, whose rings nothing damps) and its size (largest extent, metres; None: the voice's
    own), which sets its pitch and ring time."""

    time_s: float
    impulse: float
    material: int
    source: int = -1
    size_m: float | None = None


def emit(
    renderer: EventRenderer, end: int, timer: StageTimer, *, last: bool = False
) -> Iterator[np.ndarray]:
    """The renderer's audio up to sample `end`, a second at most at a time: a long gap between
    two frames is that much audio, never held at once. `last`: the stream's end, which yields
    at least one (maybe empty) chunk."""
    if last and end <= renderer.taken:
        yield np.zeros(0, np.float32)
    while renderer.taken < end:
        with timer("render"):
            chunk = renderer.take(min(end - renderer.taken, renderer.sample_rate))
        yield chunk


class Layer(Protocol):
    def take(self, n: int) -> np.ndarray: ...


class EventRenderer:
    def __init__(
        self, spec: RendererSpec, sample_rate: int, *, seed: int = 0, layer: Layer | None = None
    ) -> None:
        self.spec, self.sample_rate, self.seed, self.layer = spec, sample_rate, seed, layer
        self.taken = 0  # samples handed out
        # Per source: its samples from `taken` on, of the events started so far.
        self.pending: dict[int, np.ndarray] = {}
        self.count = 0

    def add(self, event: Event) -> None:
        start = int(np.ceil(event.time_s * self.sample_rate - 1e-9))
        if start < self.taken:
            raise ValueError(
                f"event at {event.time_s:.6f} s starts before sample {self.taken} already taken"
            )
        voice = self.spec.voices[event.material]
        level = voice.loudness * max(event.impulse, 0.0) ** self.spec.impulse_exponent
        rng = np.random.default_rng([self.seed, self.count])
        self.count += 1
        sound = level * self._voice(
            voice, event.size_m, start / self.sample_rate - event.time_s, rng
        )
        at = start - self.taken
        pending = self.pending.get(event.source, np.zeros(0))
        if event.source >= 0 and at < len(pending):
            ramp = int(DAMP_S * self.sample_rate)
            damping = np.full(len(pending) - at, CONTACT_DAMPING)
            head = min(ramp, len(damping))
            damping[:head] = np.linspace(1.0, CONTACT_DAMPING, ramp)[:head]
            pending[at:] *= damping
        if at + len(sound) > len(pending):
            pending = np.concatenate([pending, np.zeros(at + len(sound) - len(pending))])
        pending[at : at + len(sound)] += sound
        self.pending[event.source] = pending

    def take(self, n: int) -> np.ndarray:
        """The next n samples, float32, scaled and soft-limited."""
        out = np.zeros(n) if self.layer is None else self.layer.take(n)
        for source, pending in list(self.pending.items()):
            m = min(n, len(pending))
            out[:m] += pending[:m]
            if m == len(pending):
                del self.pending[source]  # rung out: memory stays bounded by the live rings
            else:
                self.pending[source] = pending[m:]
        self.taken += n
        return soft_limit(self.spec.gain * out).astype(np.float32)

    def _voice(
        self, voice: Voice, size_m: float | None, offset_s: float, rng: np.random.Generator
    ) -> np.ndarray:
        """One unit-level event's samples; sample 0 is `offset_s` (in [0, 1/sr)) after it."""
        sr = self.sample_rate
        tau = voice.contact_ms * 1e-3
        own = self.spec.voice_size_m
        scale = 1.0 if size_m is None else own / float(np.clip(size_m, *SIZE_RANGE_M))
        freqs = np.asarray(voice.freqs_hz) * scale
        decays = np.asarray(voice.decays) * scale**RING_SIZE_EXPONENT
        audible = freqs < min(MAX_MODE_HZ, 0.45 * sr)
        freqs, decays = freqs[audible], decays[audible]
        amps = np.asarray(voice.amps)[audible] / np.sqrt(1.0 + (freqs * tau) ** 2)
        ring_s = min(self.spec.max_ring_s, float(np.log(1000.0) / decays.min()))
        t = offset_s + np.arange(int(ring_s * sr) + 1) / sr
        out = np.zeros_like(t)
        for f, d, a in zip(freqs, decays, amps, strict=True):
            n = min(len(t), int(np.log(1e4) / d * sr) + 1)  # to -80 dB
            out[:n] += a * np.exp(-d * t[:n]) * np.sin(2 * np.pi * f * t[:n])
        decay = max(tau, CLICK_FLOOR_S)
        n = min(len(t), int(8 * decay * sr) + 2)
        noise = rng.standard_normal(n) * np.exp(-t[:n] / decay)
        cutoff = min(0.45 * sr, 0.5 / tau)
        alpha = 1.0 - np.exp(-2 * np.pi * cutoff / sr)
        click = np.zeros(n)
        state = 0.0
        for i in range(n):  # one-pole low-pass; n is a few hundred samples at most
            state += alpha * (noise[i] - state)
            click[i] = state
        out[:n] += self.spec.click_level * click / np.sqrt(alpha)
        return out


def soft_limit(
    x: np.ndarray, knee: float = LIMIT_KNEE, ceiling: float = LIMIT_CEILING
) -> np.ndarray:
    """Identity for |x| <= knee; above, tanh-compressed towards `ceiling` (never reaching it
    by more than float rounding). Monotonic and continuous in slope at the knee. The simulator's
    soundtracks (engines.audio.render) are limited by the same function."""
    over = np.abs(x) > knee
    if not over.any():
        return x
    y = x.copy()
    head = ceiling - knee
    y[over] = np.sign(x[over]) * (knee + head * np.tanh((np.abs(x[over]) - knee) / head))
    return y
