"""Continuous contact sound: sliding (bright, scraping) and rolling (low rumble) noise.

Each source is stationary filtered noise, coloured by the two materials, times a level envelope
built from the physics-rate contact track:

    sliding  ~ SLIDE_LEVEL * slide_speed * normal_force ** 0.5
    rolling  ~ ROLL_LEVEL * roll_speed * normal_force ** 0.25

Speeds under `SPEED_DEADBAND` count as zero (a resting body's solver jitter is not a sound). The
envelope is bridged over single-step contact flicker, interpolated to the sample rate and
smoothed over ~3 ms, so it is zero wherever the pair has not touched for a few ms.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import maximum_filter1d
from scipy.signal import butter, lfilter, sosfilt

from engines.audio.modal import object_modes, object_rng, surface_modes, surface_rng
from engines.sim.materials import material
from engines.sim.types import GROUND, ContactTrack, Impact

SLIDE_LEVEL = 0.08
ROLL_LEVEL = 0.1
SPEED_DEADBAND = 0.02  # m/s
SMOOTH_S = 0.003
RESONANCE_MIX = 0.6  # share of the noise passed through the object's modes


def render_track(
    track: ContactTrack, *, n_samples: int, sample_rate: int, seed: int, rng: np.random.Generator
) -> np.ndarray:
    """(n_samples,) float64 sound of one pair's sliding and rolling; zeros when it never moves
    while touching. `seed` fixes the object's and floor's modes as for its impacts; `rng` draws
    the noise."""
    out = np.zeros(n_samples)
    slide_env, roll_env = envelopes(track, n_samples=n_samples, sample_rate=sample_rate)
    active = np.nonzero((slide_env > 0) | (roll_env > 0))[0]
    if len(active) == 0:
        return out
    lo, hi = int(active[0]), int(active[-1]) + 1
    modes = object_modes(_as_impact(track), sample_rate, object_rng(seed, track.object_id))
    if slide_env[lo:hi].any():
        noise = _slide_noise(track, hi - lo, sample_rate, rng, modes.freqs[:3], modes.decays[:3])
        out[lo:hi] += slide_env[lo:hi] * noise
    if roll_env[lo:hi].any():
        out[lo:hi] += roll_env[lo:hi] * _roll_noise(
            track, hi - lo, sample_rate, seed, rng, modes.freqs[:1], modes.decays[:1]
        )
    return out


def envelopes(
    track: ContactTrack, *, n_samples: int, sample_rate: int
) -> tuple[np.ndarray, np.ndarray]:
    """Slide and roll amplitude envelopes at the sample rate, each (n_samples,) >= 0."""
    force = maximum_filter1d(track.normal_force, 3)  # bridge one-step contact flicker
    loud = material(track.material).acoustics.loudness
    slide = np.maximum(track.slide_speed - SPEED_DEADBAND, 0.0)
    roll = np.maximum(track.roll_speed - SPEED_DEADBAND, 0.0)
    slide_lvl = maximum_filter1d(SLIDE_LEVEL * loud * slide * np.sqrt(force), 3)
    roll_lvl = maximum_filter1d(ROLL_LEVEL * loud * roll * force**0.25, 3)
    t = np.arange(n_samples) / sample_rate
    return (
        _smooth(np.interp(t, track.time_s, slide_lvl, right=0.0), sample_rate),
        _smooth(np.interp(t, track.time_s, roll_lvl, right=0.0), sample_rate),
    )


def _smooth(env: np.ndarray, sample_rate: int) -> np.ndarray:
    if not env.any():
        return env
    a = 1.0 - np.exp(-1.0 / (SMOOTH_S * sample_rate))
    return np.maximum(lfilter([a], [1.0, a - 1.0], env), 0.0)


def _slide_noise(
    track: ContactTrack,
    n: int,
    sample_rate: int,
    rng: np.random.Generator,
    freqs: np.ndarray,
    decays: np.ndarray,
) -> np.ndarray:
    """Unit-RMS band noise around the pair's friction frequency, partly through the object's
    lowest modes (a scraped metal box rings, a scraped wooden one knocks)."""
    centre = np.sqrt(
        material(track.material).acoustics.friction_hz
        * material(track.other_material).acoustics.friction_hz
    )
    band = (max(centre / 2.5, 40.0), min(centre * 2.5, 0.45 * sample_rate))
    white = rng.standard_normal(n)
    broad = _unit(sosfilt(butter(2, band, "bandpass", fs=sample_rate, output="sos"), white))
    return _unit(
        (1 - RESONANCE_MIX) * broad
        + RESONANCE_MIX * _unit(_resonate(white, freqs, decays, sample_rate))
    )


def _roll_noise(
    track: ContactTrack,
    n: int,
    sample_rate: int,
    seed: int,
    rng: np.random.Generator,
    freqs: np.ndarray,
    decays: np.ndarray,
) -> np.ndarray:
    """Unit-RMS low rumble: low-passed noise plus the floor's lowest modes (or, between two
    objects, the other's friction band)."""
    hard = material(track.other_material).acoustics.friction_hz
    cutoff = min(0.15 * hard + 100.0, 0.45 * sample_rate)
    white = rng.standard_normal(n)
    rumble = _unit(sosfilt(butter(2, cutoff, "lowpass", fs=sample_rate, output="sos"), white))
    if track.other_id == GROUND:
        floor = surface_modes(track.other_material, sample_rate, surface_rng(seed))
        freqs = np.concatenate([freqs, floor.freqs[:3]])
        decays = np.concatenate([decays, floor.decays[:3]])
    return _unit(0.6 * rumble + 0.4 * _unit(_resonate(white, freqs, decays, sample_rate)))


def _resonate(x: np.ndarray, freqs: np.ndarray, decays: np.ndarray, sample_rate: int) -> np.ndarray:
    """Sum of two-pole resonators (one per mode) driven by x."""
    out = np.zeros_like(x)
    for f, d in zip(freqs, decays, strict=True):
        r = np.exp(-max(d, 20.0) / sample_rate)  # at least 20/s: a scraped mode is damped
        w = 2 * np.pi * f / sample_rate
        out += lfilter([1.0 - r], [1.0, -2.0 * r * np.cos(w), r * r], x)
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    rms = float(np.sqrt(np.mean(x * x))) if len(x) else 0.0
    return x / rms if rms > 0 else x


def _as_impact(track: ContactTrack) -> Impact:
    """The track's object as an Impact, to look its modes up like an impact's."""
    return Impact(
        time_s=0.0,
        impulse_ns=0.0,
        speed_mps=0.0,
        object_id=track.object_id,
        other_id=track.other_id,
        material=track.material,
        other_material=track.other_material,
        size_m=track.size_m,
        shape=track.shape,
    )
