"""The real-footage checks (engines.eval.footage): each bound catches what it names, and the
shipped tier renders the shipped real clip within them."""

from __future__ import annotations

import itertools
from pathlib import Path

import av
import numpy as np
import pytest

from engines.eval.footage import DEFAULT_FOOTAGE, measure, with_still_ends

RATE = 48000


def _track(level_db: float = -30.0) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """2 s of silence, 4 s of a 440 Hz tone at `level_db` RMS, 2 s of silence."""
    t = np.arange(4 * RATE) / RATE
    tone = np.sqrt(2) * 10 ** (level_db / 20) * np.sin(2 * np.pi * 440 * t)
    still = np.zeros(2 * RATE)
    return np.concatenate([still, tone, still]), [(0.0, 1.5), (6.5, 8.0)]


def test_a_clean_track_meets_every_bound() -> None:
    audio, still = _track()
    report = measure("clean", audio, RATE, still)
    assert report.failures() == []
    assert report.loudest_db == pytest.approx(-30.0, abs=0.1)
    assert report.still_onsets == 0 and report.clipped == 0


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda a: np.clip(a * 100, -1, 1), "clipping or no headroom"),
        (lambda a: a + 0.01, "DC offset"),
        (lambda a: a * 10 ** (26 / 20), "too loud"),  # -4 dBFS RMS
        (
            lambda a: a + 10 ** (-50 / 20) * np.random.default_rng(0).standard_normal(len(a)),
            "sound where nothing moves",
        ),
    ],
)
def test_each_bound_catches_what_it_names(spoil, reason: str) -> None:
    audio, still = _track()
    assert reason in measure("spoilt", spoil(audio), RATE, still).failures()


def test_a_click_in_a_still_span_is_an_onset_there() -> None:
    audio, still = _track()
    audio[int(0.7 * RATE) : int(0.7 * RATE) + 48] = 0.3
    report = measure("click", audio, RATE, still)
    assert report.still_onsets == 1
    assert "onsets where nothing moves" in report.failures()


def test_still_ends_hold_the_first_and_last_frames(tmp_path: Path) -> None:
    out = tmp_path / "held.mp4"
    start, end = with_still_ends(DEFAULT_FOOTAGE, out, hold_s=1.0)
    with av.open(str(DEFAULT_FOOTAGE)) as src:
        n = src.streams.video[0].frames or sum(1 for _ in src.decode(video=0))
    with av.open(str(out)) as held:
        frames = [f.to_ndarray(format="gray").astype(np.int16) for f in held.decode(video=0)]
    assert (start, end) == (1.0, 1.0 + n / 25)
    assert len(frames) == n + 50
    steps = [float(np.abs(b - a).mean()) for a, b in itertools.pairwise(frames)]
    moving = np.median(steps[25:-25])
    assert moving > 3.0  # grey levels per pixel: the footage moves
    # Held frames change only by the codec's refinement of the picture, a fraction of the motion.
    assert max(steps[:24] + steps[-24:]) < 0.25 * moving


def test_the_shipped_tier_on_real_footage(real_engine, tmp_path: Path) -> None:
    """No clipping, no DC offset, bounded loudness, and silence where nothing moves, on real
    camera footage."""
    from engines.eval.footage import render

    report = render(real_engine, DEFAULT_FOOTAGE, tmp_path, hold_s=2.0)
    assert report.failures() == []
    assert report.duration_s == pytest.approx(11.6, abs=0.05)
