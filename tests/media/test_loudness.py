"""Loudness normalisation of a render (service.media.loudness): on target, under the ceiling,
one gain where no attack passes it, aligned, and nothing written when the render fails."""

from __future__ import annotations

import numpy as np
import pytest

from service.media.loudness import CEILING_DBTP, LIMIT_MARGIN_DB, LevelledSink, LiveLevel, measure

RATE = 48000


class Collected:
    """An output sink that keeps what it receives."""

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.exited_with: object = "open"
        self.notes: tuple[str, ...] = ()

    def write(self, samples: np.ndarray) -> None:
        self.chunks.append(np.array(samples, np.float32))

    def __enter__(self) -> Collected:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.exited_with = exc_type

    @property
    def samples(self) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.float32), *self.chunks])


def impacts(seconds: float = 6.0, seed: int = 0, level: float = 0.02) -> np.ndarray:
    """Decaying modal rings at random times, quiet and peaky like a Foley render."""
    rng = np.random.default_rng(seed)
    out = np.zeros(round(seconds * RATE), np.float32)
    t = np.arange(RATE // 2) / RATE
    for start in rng.integers(0, len(out) - len(t), 14):
        ring = sum(np.sin(2 * np.pi * f * t) * np.exp(-t * d) for f, d in ((520, 30), (1330, 45)))
        out[start : start + len(t)] += (level * rng.uniform(0.2, 1.0) * ring).astype(np.float32)
    return out


def levelled(x: np.ndarray, target: float, chunk: int = 1600) -> tuple[Collected, LevelledSink]:
    output = Collected()
    with LevelledSink(output, sample_rate=RATE, target_lufs=target) as sink:
        for start in range(0, len(x), chunk):
            sink.write(x[start : start + chunk])
    return output, sink


def test_a_sine_reads_as_the_standard_says() -> None:
    # BS.1770: a 1 kHz sine of mean square 0.005 in one channel is -23.0 LUFS.
    t = np.arange(3 * RATE) / RATE
    loudness = measure((0.1 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), RATE)
    assert loudness.integrated_lufs == pytest.approx(-23.0, abs=0.05)
    assert loudness.true_peak_dbtp == pytest.approx(-20.0, abs=0.05)


@pytest.mark.parametrize(("target", "limited"), [(-23.0, False), (-16.0, True), (-31.0, False)])
def test_a_peaky_track_lands_on_target_under_the_ceiling(target: float, limited: bool) -> None:
    x = impacts()
    assert measure(x, RATE).integrated_lufs < target - 10
    output, sink = levelled(x, target)
    y = output.samples
    assert len(y) == len(x)
    measured = measure(y, RATE)
    assert measured.integrated_lufs == pytest.approx(target, abs=0.5)
    assert measured.true_peak_dbtp <= CEILING_DBTP
    assert sink.levelling is not None
    assert (sink.levelling.limited_db > 0) == limited
    assert sink.levelling.loudness.integrated_lufs == pytest.approx(
        measured.integrated_lufs, abs=0.05
    )
    # The limiter keeps every attack where it was: onsets line up sample for sample.
    onsets = np.flatnonzero((np.abs(x[1:]) > 0) & (x[:-1] == 0))
    assert np.array_equal(onsets, np.flatnonzero((np.abs(y[1:]) > 0) & (y[:-1] == 0)))


def test_a_track_whose_peaks_stay_under_the_ceiling_gets_one_gain() -> None:
    rng = np.random.default_rng(1)
    x = (0.003 * rng.standard_normal(4 * RATE)).astype(np.float32)  # peak-to-loudness ~ 13 dB
    output, sink = levelled(x, -23.0)
    assert sink.levelling is not None and sink.levelling.limited_db == 0.0
    gain = 10 ** (sink.levelling.gain_db / 20)
    np.testing.assert_allclose(output.samples, x * gain, rtol=1e-5, atol=1e-7)
    assert measure(output.samples, RATE).integrated_lufs == pytest.approx(-23.0, abs=0.1)


def test_silence_keeps_its_level() -> None:
    output, sink = levelled(np.zeros(2 * RATE, np.float32), -23.0)
    assert not output.samples.any() and len(output.samples) == 2 * RATE
    assert sink.levelling is not None
    assert sink.levelling.gain_db == 0.0
    assert sink.levelling.loudness.integrated_lufs is None


def test_a_failed_render_writes_nothing_and_closes_the_output() -> None:
    output = Collected()
    with pytest.raises(RuntimeError), LevelledSink(output, sample_rate=RATE) as sink:
        sink.write(impacts(1.0))
        raise RuntimeError("the render failed")
    assert output.chunks == []
    assert output.exited_with is RuntimeError
    assert sink.levelling is None


def test_a_live_stream_takes_one_gain_under_the_ceiling_whatever_its_chunks() -> None:
    x = impacts(3.0)
    gain = 40.0  # enough to push the loudest attacks over the ceiling

    def streamed(chunk: int) -> np.ndarray:
        level = LiveLevel(RATE, gain)
        parts = [level.push(x[i : i + chunk]) for i in range(0, len(x), chunk)]
        return np.concatenate([*parts, level.flush()])

    one, other = streamed(1600), streamed(733)
    assert len(one) == len(x)
    np.testing.assert_array_equal(one, other)
    assert np.abs(one).max() <= 10 ** ((CEILING_DBTP - LIMIT_MARGIN_DB) / 20) + 1e-6
