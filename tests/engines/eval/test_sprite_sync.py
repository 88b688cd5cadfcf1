"""The sync evaluation on sprite clips: each clip's reference is the generator's own labels, its
video keeps the generator's frame times, and `--scenes sprites` reports through a real tier."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from engines.eval.onsets import Reference
from engines.eval.reference import MERGE_S
from engines.eval.scenes import SPRITE_CUT_WINDOW_S, sprite_clip
from engines.eval.sync import clicks, main
from engines.sim.sprites import sample_clip
from tests.pipeline import test_motion_tier

DURATION_S = 1.0
# Drawn at DURATION_S: two required contacts 18 ms apart, one not required, and a shot cut.
MERGED_DROP = 5_000_020
# Drawn at DURATION_S: four required strikes, one not required, frames dropped (variable rate).
DROPPED_FRAMES_STRIKE = 5_000_036
tier_dir = test_motion_tier.tier_dir  # a motion tier of a tiny head that fires now and then


def frame_times(video: Path) -> np.ndarray:
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        return np.sort([float(f.pts * f.time_base) for f in container.decode(stream)])


@pytest.mark.parametrize(
    ("seed", "kind"), [(MERGED_DROP, "drop"), (DROPPED_FRAMES_STRIKE, "strike")]
)
def test_a_sprite_clip_requires_its_required_contacts_merged_and_nothing_else(
    tmp_path, seed: int, kind: str
) -> None:
    clip = sprite_clip(seed, kind, tmp_path, DURATION_S)
    drawn = sample_clip(seed, kind=kind, duration_s=DURATION_S)
    required = [c.time_s for c in drawn.contacts if c.required]
    others = [c.time_s for c in drawn.contacts if not c.required]
    ref = clip.reference
    assert len(others) > 0 and len(ref.required) > 0
    assert set(ref.required) <= set(required) and set(others) <= set(ref.dont_care)
    assert sorted([*ref.required, *ref.dont_care]) == sorted(c.time_s for c in drawn.contacts)
    assert np.all(np.diff(ref.required) >= MERGE_S)
    for t in set(required) - set(ref.required):  # merged into the required onset before it
        assert np.min(t - ref.required[ref.required <= t]) < MERGE_S
    np.testing.assert_array_equal(clip.contacts_s, [c.time_s for c in drawn.contacts])
    assert not clip.control and clip.spurious_span_s == (0.0, 0.0) and clip.truth is None
    np.testing.assert_allclose(frame_times(clip.video), drawn.times_s, atol=1 / 90000)


def test_merged_contacts_are_one_required_onset_and_the_cut_is_between_its_shots(
    tmp_path,
) -> None:
    clip = sprite_clip(MERGED_DROP, "drop", tmp_path, DURATION_S)
    drawn = sample_clip(MERGED_DROP, kind="drop", duration_s=DURATION_S)
    assert sum(c.required for c in drawn.contacts) == 2 and len(clip.reference.required) == 1
    (k,) = drawn.cuts
    assert clip.cut_s is not None and drawn.times_s[k - 1] < clip.cut_s < drawn.times_s[k]
    assert clip.cut_window_s == SPRITE_CUT_WINDOW_S
    assert clip.rate == "60"


def test_frames_dropped_make_a_variable_rate_clip(tmp_path) -> None:
    assert sprite_clip(DROPPED_FRAMES_STRIKE, "strike", tmp_path, DURATION_S).rate == "vfr"


def test_a_hard_negative_is_a_control_over_its_whole_length(tmp_path) -> None:
    clip = sprite_clip(5_500_000, "swing", tmp_path, DURATION_S)
    assert clip.control and clip.spurious_span_s == (0.0, clip.duration_s)
    assert len(clip.reference.required) == 0


def test_the_click_ceiling_of_a_clean_clip_is_one(tmp_path) -> None:
    clip = sprite_clip(DROPPED_FRAMES_STRIKE, "strike", tmp_path, DURATION_S)
    score = clicks(clip.reference, clip.duration_s)
    assert score.f1 == 1.0 and score.true_positives == len(clip.reference.required)
    assert np.abs(score.errors_s).max() <= 1e-3
    spaced = Reference(np.arange(0.1, 2.0, 0.2), np.array([0.15]))
    assert clicks(spaced, 2.0).f1 == 1.0


def test_sprites_are_reported_end_to_end_through_a_tier(tier_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FOLEY_MODELS_DIR", str(tier_dir))
    # 5_000_007: a strike with a shot cut; then a drop; one hard negative (a swing).
    argv = ["--scenes", "sprites", "--tier", "motion", "--seed", "5000007"]
    main([*argv, "--clips", "2", "--controls", "1", "--duration", str(DURATION_S)])
    report = capsys.readouterr().out
    assert "scenes: 2   required onsets:" in report
    assert "clicks (ceiling)       1.000 1.000 1.000" in report
    assert "fired events heard in their render" in report  # the head fired
    assert "true track" not in report and "masking" not in report
    for kind in ("strike", "drop", "swing"):
        assert f"  {kind:>8}: " in report
    assert "controls: 1 clips" in report and "shot cuts voiced: " in report


def test_sprite_seeds_that_may_be_trained_on_are_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--scenes", "sprites", "--seed", "123"])
    assert exit_.value.code == 2 and "trained on" in capsys.readouterr().err
