"""The sync ceiling's oracles, on trajectories and scenes with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from engines.eval.ceiling import (
    MODEL_PIXELS,
    oracle_clip,
    oracle_events,
    scores,
    velocity_change_px,
)
from engines.eval.onsets import MIN_GAP_S


def _bounce(fps: int, down_px: float, up_px: float, contact_s: float = 0.5) -> np.ndarray:
    """One object falling at `down_px`, then rising at `up_px` model pixels per model frame,
    turning at `contact_s`: (N, 1, 2) normalised device coordinates at frames k / fps."""
    t = np.arange(round(fps * 1.0)) / fps
    frames = (t - contact_s) * 30  # in model frames from the contact
    y_px = np.where(frames < 0, -down_px * frames, up_px * frames)
    xy = np.zeros((len(t), 1, 2))
    xy[:, 0, 1] = y_px / (MODEL_PIXELS / 2)
    return xy


@pytest.mark.parametrize("fps", [24, 30, 60])
def test_velocity_change_is_in_model_pixels_per_model_frame_at_any_rate(fps: int) -> None:
    xy = _bounce(fps, down_px=2.0, up_px=1.0, contact_s=0.51)
    assert velocity_change_px(xy, fps, 0.51, 0) == pytest.approx(3.0, abs=1e-6)


def test_velocity_change_is_zero_out_of_the_picture_and_at_the_clip_edges() -> None:
    xy = _bounce(30, down_px=2.0, up_px=1.0, contact_s=0.51)
    assert velocity_change_px(xy + 1.5, 30, 0.51, 0) == 0.0  # all of it off to the side
    assert velocity_change_px(xy, 30, 0.01, 0) == 0.0  # no frame before the one before
    assert velocity_change_px(xy, 30, 0.99, 0) == 0.0  # no frame after the one after


def test_a_uniform_motion_has_no_change() -> None:
    xy = _bounce(25, down_px=1.5, up_px=-1.5, contact_s=0.5)
    assert velocity_change_px(xy, 25, 0.5, 0) == pytest.approx(0.0, abs=1e-9)


def test_the_every_contact_oracle_finds_every_reference_onset_on_simulated_scenes() -> None:
    clips = [oracle_clip(1_000_000 + i, 30, duration_s=2.0, holdout=False) for i in range(3)]
    assert sum(len(c.reference) for c in clips) > 0
    every = scores(clips)["every contact"]
    assert every.recall == 1.0  # the reference is a subset of the contacts
    for c in clips:
        events = oracle_events(c, None)
        assert (np.diff(events) >= MIN_GAP_S).all()
        seen = oracle_events(c, 4.0)
        assert len(seen) <= len(events)
        assert all(np.min(np.abs(events - t)) < MIN_GAP_S for t in seen)
