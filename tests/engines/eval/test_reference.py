"""The required-onset reference on simulated clips: what a viewer sees and would expect to hear."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engines.eval.onsets import score_onsets
from engines.eval.reference import (
    contacts,
    in_view,
    motion_change_px,
    required_reference,
)
from engines.eval.scenes import control_clip, film, scene_clip
from engines.sim import scene_from_seed, simulate
from tests.engines.scenes import drop_scene

SIZE = (160, 90)


@pytest.fixture(scope="module")
def dropped():
    """A ball let go at 0.3 s from 40 cm, filmed at 30 fps: it bounces in view."""
    return simulate(drop_scene(0.4, release_s=0.3), duration_s=2.0, fps=30, width=160, height=90)


def test_the_first_bounce_is_required_and_in_view(dropped) -> None:
    found = contacts(dropped)
    reference = required_reference(dropped)
    first = found[0].time_s
    assert 0.55 < first < 0.65  # 0.3 s + sqrt(2 * 0.4 / 9.81)
    assert in_view(dropped, found[0])
    assert motion_change_px(dropped, found[0]) > 2.0
    assert reference.required[0] == pytest.approx(first)
    assert len(reference.required) + len(reference.dont_care) == len(found)


def test_a_contact_out_of_the_frame_is_not_required(dropped) -> None:
    outside = replace(dropped, screen_xy=dropped.screen_xy + 5.0)
    reference = required_reference(outside)
    assert len(reference.required) == 0
    assert len(reference.dont_care) == len(contacts(dropped))


def test_free_fall_alone_is_no_visible_change(dropped) -> None:
    found = contacts(dropped)[0]
    before = replace(found, time_s=found.time_s - 0.1)  # mid-air: the arc bends, nothing hits
    assert motion_change_px(dropped, before) < 0.5


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_an_oracle_at_every_simulated_contact_scores_one(seed: int) -> None:
    clip = simulate(
        scene_from_seed(seed, kind="multi"), duration_s=3.0, fps=25, width=160, height=90
    )
    times = np.array([c.time_s for c in contacts(clip)])
    reference = required_reference(clip, seed=seed)
    assert len(reference.required) >= 1
    assert score_onsets(times, reference).f1 == 1.0


def test_variable_frame_rate_and_controls_film(tmp_path) -> None:
    vfr = scene_clip(5, "vfr", tmp_path, holdout=False, duration_s=1.5, size=SIZE, kind="drop")
    assert vfr.video.exists() and len(vfr.truth) == 72000
    steps = np.diff(film(scene_from_seed(5, kind="drop"), 5, "vfr", 1.5, SIZE, None).times_s)
    assert steps.max() > 1.4 * steps.min()
    cut = control_clip("cut", 7, "25", tmp_path, holdout=False, duration_s=2.0, size=SIZE)
    assert cut.control and cut.cut_s == pytest.approx(1.0)
    assert np.all(np.abs(cut.reference.required - cut.cut_s) > 0) and len(cut.truth) == 96000
    still = control_clip("static", 8, "30", tmp_path, holdout=False, duration_s=1.0, size=SIZE)
    assert len(still.reference.required) == 0 and len(still.contacts_s) == 0
