"""Impact sounds by modal synthesis: damped sinusoids plus a contact click.

An impact excites the struck object's modes (frequencies ~ f0(material) * 0.1 m / size, times
shape-dependent ratios), the surface's modes when it hits the floor, and a short broadband
click. Every component starts at the exact contact time (a sub-sample offset): sinusoids start
at phase zero, the click at full level and decays within ~1-5 ms, so the energy onset sits on the
ground-truth time.

Level is a fixed function of the impulse, amplitude ~ impulse ** IMPULSE_EXPONENT: no per-clip
normalisation, so a harder hit is always louder. Hardness is the contact duration: the longer
(softer) of the two materials' contacts low-passes both the modes and the click, and a faster
impact shortens it (Hertz contact time ~ v^-1/5), so rubber thuds and steel clicks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from engines.sim.materials import Acoustics, material
from engines.sim.types import GROUND, Impact

IMPULSE_EXPONENT = 0.8
REFERENCE_SIZE_M = 0.1
CLICK_LEVEL = 0.35  # click amplitude relative to the modes' (before the hardness filter)
SURFACE_LEVEL = 0.6
MAX_RING_S = 3.0
# Mode frequency ratios. Sphere: spheroidal modes of an elastic sphere; box: a free plate;
# cylinder: a free bar/shell mix; capsule: free-free beam; plate: a large floor panel.
MODE_RATIOS: dict[str, tuple[float, ...]] = {
    "sphere": (1.0, 1.51, 1.97, 2.43, 2.87, 3.32),
    "box": (1.0, 1.47, 2.09, 2.56, 2.87, 3.51, 4.11),
    "cylinder": (1.0, 1.63, 2.45, 2.92, 3.73, 4.84),
    "capsule": (1.0, 2.76, 5.40, 8.93),
    "plate": (1.0, 1.59, 2.14, 2.30, 2.65, 2.92, 3.16, 3.50, 4.06, 4.56),
}


@dataclass(frozen=True)
class ModeSet:
    """Frequencies (Hz), decay rates (1/s) and amplitudes of a set of damped sinusoids."""

    freqs: np.ndarray
    decays: np.ndarray
    amps: np.ndarray

    def duration_s(self) -> float:
        """Time until the slowest mode is 60 dB down (capped)."""
        if len(self.decays) == 0:
            return 0.0
        return float(min(MAX_RING_S, np.log(1000.0) / self.decays.min()))


def object_modes(impact: Impact, sample_rate: int, rng: np.random.Generator) -> ModeSet:
    """Modes of the struck object, amplitude for unit excitation (before hardness)."""
    ac = material(impact.material).acoustics
    f0 = ac.f0_hz * REFERENCE_SIZE_M / impact.size_m
    # Bigger objects ring longer (lower modes lose less energy per cycle to radiation).
    t60 = ac.t60_s * (impact.size_m / REFERENCE_SIZE_M) ** 0.4
    return _modes(f0, t60, ac, MODE_RATIOS[impact.shape], sample_rate, rng)


def surface_modes(surface: str, sample_rate: int, rng: np.random.Generator) -> ModeSet:
    ac = material(surface).acoustics
    return _modes(ac.f0_hz, ac.t60_s, ac, MODE_RATIOS["plate"], sample_rate, rng)


def _modes(
    f0: float,
    t60: float,
    ac: Acoustics,
    ratios: tuple[float, ...],
    sample_rate: int,
    rng: np.random.Generator,
) -> ModeSet:
    r = np.asarray(ratios) ** (1.0 + ac.stretch)
    freqs = f0 * r * rng.uniform(0.985, 1.015, len(r))
    # Higher modes decay faster (material damping grows with frequency).
    decays = np.log(1000.0) / t60 * r**0.7
    # Where the object is struck changes which modes sound: random weights, falling with order.
    amps = rng.uniform(0.3, 1.0, len(r)) / r**0.5
    keep = freqs < min(18_000.0, 0.45 * sample_rate)
    amps = amps / max(amps.sum(), 1e-9)
    return ModeSet(freqs[keep], decays[keep], amps[keep])


def contact_time_s(impact: Impact) -> float:
    """Duration of the contact: the softer material dominates; faster impacts are shorter."""
    ms = max(
        material(impact.material).acoustics.contact_ms,
        material(impact.other_material).acoustics.contact_ms,
    )
    return ms * 1e-3 * max(impact.speed_mps, 0.05) ** -0.2


def impact_level(impact: Impact) -> float:
    """Amplitude scale of an impact: monotonic in the impulse, fixed across clips."""
    return material(impact.material).acoustics.loudness * impact.impulse_ns**IMPULSE_EXPONENT


def object_rng(seed: int, object_id: int) -> np.random.Generator:
    """The generator that fixes an object's modes: the same object sounds the same pitch at
    every hit, and when scraped or rolled (`engines.audio.contact`)."""
    return np.random.default_rng([seed, 1, object_id])


def surface_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, 2])


def render_impact(
    impact: Impact, *, sample_rate: int, seed: int, rng: np.random.Generator
) -> tuple[int, np.ndarray]:
    """(first sample index, samples float64) of one impact's sound.

    `seed` fixes the object's and the floor's modes; `rng` varies per-hit details (strike
    position, click noise).
    """
    tau = contact_time_s(impact)
    level = impact_level(impact)
    sets = [(object_modes(impact, sample_rate, object_rng(seed, impact.object_id)), level)]
    if impact.other_id == GROUND:
        surf = material(impact.other_material).acoustics
        sets.append(
            (
                surface_modes(impact.other_material, sample_rate, surface_rng(seed)),
                level * SURFACE_LEVEL * surf.loudness,
            )
        )
    duration = max(m.duration_s() for m, _ in sets) + 8 * tau
    start = int(np.ceil(impact.time_s * sample_rate))
    t = (start + np.arange(int(duration * sample_rate) + 1)) / sample_rate - impact.time_s
    out = np.zeros_like(t)
    for modes, gain in sets:
        amps = modes.amps * rng.uniform(0.8, 1.2, len(modes.amps)) * _hardness(modes.freqs, tau)
        out += gain * _damped_sines(t, modes, amps, sample_rate)
    out += level * CLICK_LEVEL * _click(t, tau, sample_rate, rng)
    return start, out


def _hardness(freqs: np.ndarray, tau: float) -> np.ndarray:
    """Excitation spectrum of a contact lasting tau: flat below ~1/tau, falling 6 dB/octave
    above. (A half-sine pulse falls at 12 dB/octave, but that silenced every mode on carpet:
    a spoon dropped on carpet still clinks faintly.)"""
    return 1.0 / np.sqrt(1.0 + (freqs * tau) ** 2)


def _damped_sines(t: np.ndarray, modes: ModeSet, amps: np.ndarray, sample_rate: int) -> np.ndarray:
    out = np.zeros_like(t)
    for f, d, a in zip(modes.freqs, modes.decays, amps, strict=True):
        n = min(len(t), int(np.log(1e4) / d * sample_rate) + 1)  # to -80 dB
        tt = t[:n]
        out[:n] += a * np.exp(-d * tt) * np.sin(2 * np.pi * f * tt)
    return out


def _click(t: np.ndarray, tau: float, sample_rate: int, rng: np.random.Generator) -> np.ndarray:
    """Noise burst: full level at contact, decaying over ~the contact time (>= 0.3 ms), and
    low-passed at ~1/(2 tau) so soft contacts sound dull."""
    decay = max(tau, 3e-4)
    n = min(len(t), int(8 * decay * sample_rate) + 2)
    noise = rng.standard_normal(n) * np.exp(-t[:n] / decay)
    cutoff = min(0.45 * sample_rate, 0.5 / tau)
    alpha = 1.0 - np.exp(-2 * np.pi * cutoff / sample_rate)  # one-pole low-pass
    out = np.zeros_like(t)
    out[:n] = lfilter([alpha], [1.0, alpha - 1.0], noise)
    # Keep the click's energy independent of its bandwidth, so soft hits are dull, not silent.
    return out / np.sqrt(alpha)
