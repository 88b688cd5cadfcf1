"""Contact events -> audio, with each attack on its sample.

An event (time, impulse, material, size) sounds as its tier's voicing makes it: modes (damped
sinusoids) and a short noise burst, all starting at the event's exact time, sub-sample phase
included, the way the simulator's sound model makes an impact (engines.audio.modal; `ring`).
`ModalVoices` are a tier's hand-set voices: the material's modes moved to the event's size (half
the size: twice the pitch, a shorter ring), level the material's loudness times
impulse ** impulse_exponent, hardness (contact_ms) low-passing modes and burst, so rubber thuds
and steel clicks. The `motion` tier's voicing is its vocoder (service.pipeline.motion.vocoder).

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

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from service.pipeline.contacts.tier import RendererSpec

LIMIT_KNEE = 0.9
LIMIT_CEILING = 0.99  # < 1 even after float32 rounding, which tanh(large) = 1.0 would not be
CLICK_FLOOR_S = 3e-4
CONTACT_DAMPING = 0.3  # amplitude left of a source's rings once it touches down again
DAMP_S = 0.003
# A voice's modes are those of an object of the spec's voice_size_m; another size scales them as
# the simulator's sound model does (engines.audio.modal): pitch ~ 1 / size, ring time ~ size^0.4.
RING_SIZE_EXPONENT = 0.4
MAX_MODE_HZ = 18_000.0
BLOCK = 512  # samples per block of the modes' sum (_damped_sines)
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


def first_sample(time_s: float, sample_rate: int) -> int:
    """The first sample at or after `time_s`: where a sound starting then is heard."""
    return int(np.ceil(time_s * sample_rate - 1e-9))


class Layer(Protocol):
    def take(self, n: int) -> np.ndarray: ...


class Voicing(Protocol):
    """How events sound: `voice` gives an event's samples at its level, sample 0 `offset_s`
    (in [0, 1 / sample_rate)) after its time; `gain` scales the mix before the limiter."""

    sample_rate: int
    gain: float

    def voice(self, event: Event, offset_s: float, rng: np.random.Generator) -> np.ndarray: ...


class EventRenderer:
    def __init__(self, voicing: Voicing, *, seed: int = 0, layer: Layer | None = None) -> None:
        self.voicing, self.seed, self.layer = voicing, seed, layer
        self.sample_rate = voicing.sample_rate
        self.taken = 0  # samples handed out
        # Per source: its samples from `taken` on, of the events started so far.
        self.pending: dict[int, np.ndarray] = {}
        self.count = 0

    def add(self, event: Event) -> None:
        start = first_sample(event.time_s, self.sample_rate)
        if start < self.taken:
            raise ValueError(
                f"event at {event.time_s:.6f} s starts before sample {self.taken} already taken"
            )
        rng = np.random.default_rng([self.seed, self.count])
        self.count += 1
        sound = self.voicing.voice(event, start / self.sample_rate - event.time_s, rng)
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
        return soft_limit(self.voicing.gain * out).astype(np.float32)


class ModalVoices:
    """The hand-set voices of a tier's renderer spec: per material, the modes of an object of
    voice_size_m moved to the event's size, hardness low-passing them, level loudness times
    impulse ** impulse_exponent."""

    def __init__(self, spec: RendererSpec, sample_rate: int) -> None:
        self.spec, self.sample_rate, self.gain = spec, sample_rate, spec.gain

    def voice(self, event: Event, offset_s: float, rng: np.random.Generator) -> np.ndarray:
        spec, voice = self.spec, self.spec.voices[event.material]
        level = voice.loudness * max(event.impulse, 0.0) ** spec.impulse_exponent
        tau = voice.contact_ms * 1e-3
        own = spec.voice_size_m
        size_m = event.size_m
        scale = 1.0 if size_m is None else own / float(np.clip(size_m, *SIZE_RANGE_M))
        freqs = np.asarray(voice.freqs_hz) * scale
        decays = np.asarray(voice.decays) * scale**RING_SIZE_EXPONENT
        amps = np.asarray(voice.amps) / np.sqrt(1.0 + (freqs * tau) ** 2)
        modes = Modes(freqs, decays, amps, spec.click_level, tau)
        samples: np.ndarray = level * ring(modes, offset_s, self.sample_rate, spec.max_ring_s, rng)
        return samples


@dataclass(frozen=True)
class Modes:
    """A struck object's sound for a unit excitation: damped sinusoids (Hz, 1/s, amplitude) and
    a noise burst (its level and the contact's duration, s)."""

    freqs: np.ndarray
    decays: np.ndarray
    amps: np.ndarray
    click: float
    contact_s: float


def ring(
    modes: Modes, offset_s: float, sample_rate: int, max_ring_s: float, rng: np.random.Generator
) -> np.ndarray:
    """The samples of `modes` struck at time 0, sample 0 `offset_s` after it: every mode starts at
    phase zero, the burst at full level, decaying over the contact's duration (at least
    CLICK_FLOOR_S) and low-passed at 1 / (2 duration), so soft contacts are dull. The ring lasts
    until its slowest mode is 60 dB down, at most `max_ring_s`, as the simulator's; modes above
    MAX_MODE_HZ or 0.45 of the rate are not voiced."""
    sr = sample_rate
    audible = (modes.freqs < min(MAX_MODE_HZ, 0.45 * sr)) & (modes.amps > 0)
    freqs, decays, amps = modes.freqs[audible], modes.decays[audible], modes.amps[audible]
    slowest = float(decays.min()) if len(decays) else np.inf
    ring_s = min(max_ring_s, float(np.log(1000.0) / slowest))
    length = int(ring_s * sr) + 1
    out = _damped_sines(freqs, decays, amps, offset_s, length, sr)
    tau = modes.contact_s
    decay = max(tau, CLICK_FLOOR_S)
    n = min(length, int(8 * decay * sr) + 2)
    noise = rng.standard_normal(n) * np.exp(-(offset_s + np.arange(n) / sr) / decay)
    cutoff = min(0.45 * sr, 0.5 / tau)
    alpha = 1.0 - np.exp(-2 * np.pi * cutoff / sr)
    out[:n] += modes.click * _one_pole(noise, alpha) / np.sqrt(alpha)
    return out


def _damped_sines(
    freqs: np.ndarray, decays: np.ndarray, amps: np.ndarray, offset_s: float, n: int, sr: int
) -> np.ndarray:
    """sum_k amps_k exp(-decays_k t) sin(2 pi freqs_k t) at t = offset_s + i / sr, i < n.

    With s_k = -decays_k + 2 pi i freqs_k and t = start_b + j / sr in blocks of BLOCK samples,
    exp(s t) = exp(s start_b) exp(s j / sr): the sum is the imaginary part of one product of a
    [blocks, K] and a [K, BLOCK] matrix, a few hundred microseconds where one sine per mode and
    sample takes milliseconds."""
    blocks = -(-n // BLOCK)
    s = -decays + 2j * np.pi * freqs
    starts = offset_s + np.arange(blocks)[:, None] * BLOCK / sr
    exponent = s * starts
    # A mode e^-60 down is silence: zero, so that no product runs on denormal floats.
    a = np.where(exponent.real > -60.0, amps * np.exp(np.maximum(exponent.real, -60.0)), 0.0)
    a = a * np.exp(1j * exponent.imag)  # [blocks, K]
    b = np.exp(s[:, None] * (np.arange(BLOCK) / sr))  # [K, BLOCK]
    # einsum, not BLAS: a threaded BLAS that shares its cores with the stream's other work spends
    # tens of milliseconds waiting on this small a product.
    out = np.einsum("bk,kj->bj", a.real, b.imag) + np.einsum("bk,kj->bj", a.imag, b.real)
    samples: np.ndarray = out.reshape(-1)[:n]
    return samples


def _one_pole(x: np.ndarray, alpha: float) -> np.ndarray:
    """y[i] = y[i - 1] + alpha (x[i] - y[i - 1]) from rest: x convolved with the filter's impulse
    response alpha (1 - alpha)^k, by FFT (the service has no signal library)."""
    n = len(x)
    if n == 0:
        return x
    response = alpha * (1.0 - alpha) ** np.arange(n)
    size = 2 * n
    return np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(response, size), size)[:n]


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
