"""Sound contracts: length, alignment with ground-truth impacts, level laws, materials, limits."""

from __future__ import annotations

import dataclasses

import numpy as np

from engines.audio import synthesize
from engines.audio.modal import render_impact
from engines.audio.render import soft_limit
from engines.sim import Impact, sample_scene, simulate
from tests.engines.scenes import drop_scene, launch_scene

SR = 48000


def _clip(spec, duration_s=1.5):
    return simulate(spec, duration_s=duration_s, fps=24, width=32, height=18)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0


def _impact(material: str = "wood", impulse: float = 0.5, other: str = "carpet") -> Impact:
    return Impact(
        time_s=0.01,
        impulse_ns=impulse,
        speed_mps=2.0,
        object_id=0,
        other_id=-1,
        material=material,
        other_material=other,
        size_m=0.08,
        shape="sphere",
    )


def test_length_is_duration_times_rate() -> None:
    for duration in (0.5, 1.2345):
        clip = _clip(drop_scene(0.1), duration_s=duration)
        for sr in (48000, 16000):
            audio = synthesize(clip, sample_rate=sr, seed=0)
            assert audio.dtype == np.float32 and audio.shape == (round(duration * sr),)


def test_silent_before_first_impact_and_onsets_on_impacts() -> None:
    clip = _clip(drop_scene(0.4), duration_s=2.0)
    audio = synthesize(clip, seed=3)
    first = clip.impacts[0].time_s
    assert _rms(audio[: int(first * SR) - 1]) < 1e-7
    assert int(np.argmax(np.abs(audio) > 1e-4)) - first * SR < 0.002 * SR
    strong = [i for i in clip.impacts if i.impulse_ns > 0.2 * clip.impacts[0].impulse_ns]
    assert len(strong) >= 2
    for impact in strong:
        n = round(impact.time_s * SR)
        before = _rms(audio[n - int(0.004 * SR) : n - int(0.0005 * SR)])
        after = _rms(audio[n : n + int(0.002 * SR)])
        assert after > 4 * before + 1e-6, f"no onset at {impact.time_s:.4f} s"


def test_larger_impulse_is_louder() -> None:
    peaks = []
    for impulse in (0.1, 0.2, 0.4, 0.8):
        _, samples = render_impact(
            _impact(impulse=impulse), sample_rate=SR, seed=0, rng=np.random.default_rng(0)
        )
        peaks.append(np.abs(samples).max())
    assert np.all(np.diff(peaks) > 0)
    np.testing.assert_allclose(peaks[1] / peaks[0], 2**0.8, rtol=1e-6)  # impulse ** 0.8
    low = synthesize(_clip(drop_scene(0.15), 0.5), seed=0)
    high = synthesize(_clip(drop_scene(0.6), 0.5), seed=0)
    assert np.abs(high).max() > 1.5 * np.abs(low).max()


def _ring_time(samples: np.ndarray, db: float = 40.0) -> float:
    """Seconds until the 10 ms RMS envelope stays below peak - db."""
    frames = samples[: len(samples) // 480 * 480].reshape(-1, 480)
    env = np.sqrt(np.mean(frames**2, axis=1))
    loud = np.nonzero(env > env.max() * 10 ** (-db / 20))[0]
    return (loud[-1] + 1) * 0.01


def test_metal_rings_longer_than_wood() -> None:
    rings = {}
    for material in ("metal", "glass", "wood", "rubber"):
        _, samples = render_impact(
            _impact(material), sample_rate=SR, seed=0, rng=np.random.default_rng(0)
        )
        rings[material] = _ring_time(samples)
    assert rings["metal"] > 4 * rings["wood"]
    assert rings["glass"] > 2 * rings["wood"]
    assert rings["wood"] >= rings["rubber"]


def test_metal_plate_floor_rings() -> None:
    plate = _ring_time(
        render_impact(
            _impact("rubber", other="metal_plate"),
            sample_rate=SR,
            seed=0,
            rng=np.random.default_rng(0),
        )[1]
    )
    carpet = _ring_time(
        render_impact(
            _impact("rubber", other="carpet"), sample_rate=SR, seed=0, rng=np.random.default_rng(0)
        )[1]
    )
    assert plate > 4 * carpet


def test_onset_is_at_the_sub_sample_contact_time() -> None:
    impact = _impact(impulse=1.0)
    start, samples = render_impact(impact, sample_rate=SR, seed=0, rng=np.random.default_rng(0))
    assert start == int(np.ceil(impact.time_s * SR))
    later = dataclasses.replace(impact, time_s=impact.time_s + 10.3 / SR)
    start2, _ = render_impact(later, sample_rate=SR, seed=0, rng=np.random.default_rng(0))
    assert start2 == start + 11
    assert np.abs(samples[: int(0.001 * SR)]).max() > 0.05 * np.abs(samples).max()


def test_static_scene_is_silent() -> None:
    for seed in range(3):
        clip = _clip(sample_scene(np.random.default_rng(seed), kind="static"), 1.0)
        assert np.abs(synthesize(clip, seed=seed)).max() < 1e-5


def test_rolling_and_sliding_make_sound_while_moving() -> None:
    for shape in ("sphere", "box"):
        clip = _clip(launch_scene(shape, 1.0), 2.0)
        assert clip.impacts == []
        audio = synthesize(clip, seed=0)
        assert _rms(audio[: SR // 10]) > 1e-3, shape
    # The box has slid to a stop (mu * g decelerates it within ~0.2 s): silence.
    assert _rms(audio[-SR // 10 :]) < 1e-6


def test_synthesis_is_deterministic() -> None:
    clip = _clip(sample_scene(np.random.default_rng(2), kind="slide"), 1.0)
    a, b = synthesize(clip, seed=4), synthesize(clip, seed=4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, synthesize(clip, seed=5))


def test_soft_limit_never_clips_and_leaves_normal_levels_alone() -> None:
    x = np.linspace(-50, 50, 10001)
    y = soft_limit(x)
    assert np.abs(y).max() < 1.0
    assert np.all(np.diff(y) >= 0)
    quiet = np.linspace(-0.9, 0.9, 101)
    assert np.array_equal(soft_limit(quiet), quiet)
