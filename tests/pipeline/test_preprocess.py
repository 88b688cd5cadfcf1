"""Source frames map to model frames by timestamp, whatever the source rate or start time."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from service.pipeline.preprocess import MAX_CHUNK_FRAMES, FrameResampler, resample_clip


def _frames(pts: np.ndarray) -> np.ndarray:
    """Frame i is filled with the value i, so the mapping can be read back."""
    return np.arange(len(pts), dtype=np.uint8)[:, None, None, None] * np.ones(
        (1, 2, 2, 3), np.uint8
    )


@pytest.mark.parametrize(
    "fps",
    [Fraction(24), Fraction(25), Fraction(30000, 1001), Fraction(30), Fraction(50), Fraction(60)],
)
@pytest.mark.parametrize("start", [0.0, 1.5])
def test_each_model_frame_shows_the_latest_source_frame(fps: Fraction, start: float) -> None:
    n = int(3 * fps)
    pts = start + np.array([float(Fraction(i) / fps) for i in range(n)])
    out = resample_clip(pts, _frames(pts), fps=30, num_frames=90)
    assert len(out) == 90
    since = pts - pts[0]  # times count from the first frame (29.97 fps puts some exactly 0.1 ms
    for k in range(90):  # after a model time: the same arithmetic decides the same way)
        t = k / 30
        expected = int(np.searchsorted(since, t + 1e-4, side="right")) - 1
        assert out.rgb[k, 0, 0, 0] == expected
        # A frame a hair after t (rounding of 1001/30000) counts as on time: age 0, not negative.
        assert out.age[k] == pytest.approx(max(0.0, (t - since[expected]) * 30), abs=1e-6)
    assert (out.age >= 0).all()


def test_variable_frame_rate_keeps_real_timestamps() -> None:
    pts = np.array([0.0, 0.010, 0.2, 0.21, 0.5, 0.9])
    out = resample_clip(pts, _frames(pts), fps=30, num_frames=30)
    shown = out.rgb[:, 0, 0, 0]
    assert shown[0] == 0  # t=0
    assert shown[1] == 1  # t=0.033: the frame at 0.010
    assert shown[6] == 2 and shown[7] == 3  # t=0.2 and 0.233
    assert shown[14] == 3 and shown[15] == 4  # t=0.467 and 0.5
    assert shown[29] == 5


def test_streaming_pushes_equal_one_push() -> None:
    pts = np.arange(50) / 25 + 0.37
    rgb = _frames(pts)
    whole = resample_clip(pts, rgb, fps=30, num_frames=60)
    resampler = FrameResampler(30)
    parts = [resampler.push(pts[a:b], rgb[a:b]) for a, b in [(0, 1), (1, 2), (2, 30), (30, 50)]]
    parts.append(resampler.finish(60))
    got = [p for p in parts if p is not None]
    assert [p.start for p in got] == list(np.cumsum([0] + [len(p) for p in got[:-1]]))
    np.testing.assert_array_equal(np.concatenate([p.rgb for p in got]), whole.rgb)
    np.testing.assert_array_equal(np.concatenate([p.age for p in got]), whole.age)


def test_a_frame_is_final_once_a_frame_at_or_after_its_time_arrives() -> None:
    resampler = FrameResampler(30)
    first = resampler.push(np.array([0.0]), _frames(np.zeros(1)))
    assert first is not None and len(first) == 1  # t = 0 is shown by the frame at 0: no wait
    between = resampler.push(np.array([0.05]), _frames(np.zeros(1)))
    assert between is not None and len(between) == 1  # t = 0.033 (0.067 may still get a frame)
    assert between.start == 1 and between.age[0] == pytest.approx(1.0)
    later = resampler.push(np.array([0.1]), _frames(np.zeros(1)))
    assert later is not None and later.start == 2 and len(later) == 2  # t = 0.067 and 0.1


def test_a_far_timestamp_still_resolves_frames() -> None:
    # Absolute times this large have no room for a frame's 33 ms in float64: the resampler
    # counts from the first frame.
    pts = 1e12 + np.array([0.0, 0.5, 1.0])
    out = resample_clip(pts, _frames(pts), fps=30, num_frames=40)
    assert len(out) == 40
    assert list(out.rgb[[0, 14, 15, 29, 30, 39], 0, 0, 0]) == [0, 0, 1, 1, 2, 2]


def test_a_long_gap_comes_out_in_bounded_pieces() -> None:
    resampler = FrameResampler(30)
    pieces = resampler.chunks(np.array([0.0, 600.0]), _frames(np.zeros(2)))
    sizes = [len(piece) for piece in pieces]
    assert sum(sizes) == 600 * 30 + 1
    assert max(sizes) <= MAX_CHUNK_FRAMES
