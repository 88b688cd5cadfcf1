"""The sync of the shipped model on freshly simulated clips it never saw, through the real path:
simulated -> H.264 file at every frame rate users bring -> FoleyEngine -> WAV -> onsets, scored
against the required onsets (engines.eval.reference). Two sets: fresh scenes (the training
distribution, unseen seeds) and held-out scenes (cameras, shapes and sizes never trained on)."""

from __future__ import annotations

import numpy as np
import pytest

from engines.eval.sync import HOLDOUT_SEED_BASE, combined, evaluate, summary

# Regression floors for the shipped model on these seeds, a sampling error under what it
# measures (0.449 fresh, 0.286 held out; docs/model-card.md, Sync); 7 clips, one per frame rate,
# hold 30-45 required onsets.
FLOORS = {"fresh": 0.3, "holdout": 0.15}


@pytest.mark.parametrize("scenes", ["fresh", "holdout"])
def test_onset_f1_at_every_frame_rate(real_engine, scenes: str) -> None:
    # Seeds past those `python -m engines.eval.sync` reports on: the test is not tuned to them.
    results = evaluate(
        real_engine,
        clips=7,
        seed=HOLDOUT_SEED_BASE + 5000,
        duration_s=4.0,
        holdout=scenes == "holdout",
    )
    rendered = combined([r.rendered for r in results])
    assert rendered.true_positives + rendered.false_negatives >= 10, summary(results)
    assert rendered.f1 >= FLOORS[scenes], summary(results)


# The `objects` tier on the same seeds, a sampling error under what it measures (0.741 fresh,
# 0.483 held out; docs/model-card.md, Sync); its attacks land on the fired events.
OBJECTS_FLOORS = {"fresh": 0.55, "holdout": 0.3}


@pytest.mark.parametrize("scenes", ["fresh", "holdout"])
def test_objects_tier_onset_f1_at_every_frame_rate(objects_engine, scenes: str) -> None:
    results = evaluate(
        objects_engine,
        clips=7,
        seed=HOLDOUT_SEED_BASE + 5000,
        duration_s=4.0,
        holdout=scenes == "holdout",
    )
    rendered = combined([r.rendered for r in results])
    assert rendered.true_positives + rendered.false_negatives >= 10, summary(results)
    assert rendered.f1 >= OBJECTS_FLOORS[scenes], summary(results)
    offsets = np.concatenate([r.render_offsets_s for r in results])
    assert abs(np.median(offsets)) <= 1e-3, "the attack lands on the fired event"
