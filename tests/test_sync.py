"""The sync bar of the shipped model on freshly simulated clips it never saw (held-out scenes and
seeds), through the real path: simulated -> H.264 file -> FoleyEngine -> WAV -> onsets."""

from __future__ import annotations

from engines.eval.sync import HOLDOUT_SEED_BASE, combined, evaluate, summary

# A regression floor for the shipped model, which measures F1 0.35 on these seeds; the target it
# does not reach yet is 0.7 (docs/model-card.md).
F1_FLOOR = 0.25


def test_onset_f1_on_fresh_simulated_clips(real_engine) -> None:
    # Seeds past those `python -m engines.eval.sync` reports on: the test is not tuned to them.
    results = evaluate(real_engine, clips=8, seed=HOLDOUT_SEED_BASE + 5000, duration_s=4.0)
    total = combined([r.score for r in results])
    assert total.true_positives + total.false_negatives >= 10, summary(results)
    assert total.f1 >= F1_FLOOR, summary(results)
