"""The sync bar of the shipped model on freshly simulated clips it never saw (held-out scenes and
seeds), through the real path: simulated -> H.264 file -> FoleyEngine -> WAV -> onsets."""

from __future__ import annotations

from engines.eval.sync import HOLDOUT_SEED_BASE, combined, evaluate, summary


def test_onset_f1_on_fresh_simulated_clips(real_engine) -> None:
    # Seeds past those `python -m engines.eval.sync` reports on: the test is not tuned to them.
    results = evaluate(real_engine, clips=8, seed=HOLDOUT_SEED_BASE + 5000, duration_s=4.0)
    total = combined([r.score for r in results])
    assert total.true_positives + total.false_negatives >= 10, summary(results)
    assert total.f1 >= 0.7, summary(results)
