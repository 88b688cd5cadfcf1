"""The sync of the shipped model on freshly simulated clips it never saw, through the real path:
simulated -> H.264 file -> FoleyEngine -> WAV -> onsets. Two sets: fresh scenes (the training
distribution, unseen seeds) and held-out scenes (cameras, shapes and sizes never trained on)."""

from __future__ import annotations

import pytest

from engines.eval.sync import HOLDOUT_SEED_BASE, combined, evaluate, summary

# Regression floors for the shipped model, under what it measures on these seeds (fresh 0.535,
# held-out 0.426, where the unpruned weights before it measured 0.53 and 0.29): 8 clips hold
# 35-40 onsets, so a floor sits a sampling error under the measure. The target of 0.7 is not met yet
# (docs/model-card.md).
FLOORS = {"fresh": 0.45, "holdout": 0.2}


@pytest.mark.parametrize("scenes", ["fresh", "holdout"])
def test_onset_f1_on_fresh_simulated_clips(real_engine, scenes: str) -> None:
    # Seeds past those `python -m engines.eval.sync` reports on: the test is not tuned to them.
    results = evaluate(
        real_engine,
        clips=8,
        seed=HOLDOUT_SEED_BASE + 5000,
        duration_s=4.0,
        holdout=scenes == "holdout",
    )
    total = combined([r.score for r in results])
    assert total.true_positives + total.false_negatives >= 10, summary(results)
    assert total.f1 >= FLOORS[scenes], summary(results)
