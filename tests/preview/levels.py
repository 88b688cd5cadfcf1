"""What a live stream sounds like, from an offline render at the model's own level."""

from __future__ import annotations

import numpy as np

from service.media.loudness import LiveLevel


def at_live_level(tier, raw: np.ndarray) -> tuple[np.ndarray, float]:
    """`raw` (16-bit samples as floats, at the tier's rate) at the tier's live level, and the
    tolerance a comparison with the live stream needs (the 16-bit rounding, amplified)."""
    level = LiveLevel(tier.sample_rate, tier.live_gain_db)
    out = np.concatenate([level.push(raw.astype(np.float32)), level.flush()])
    return out, 2 / 32768 * 10 ** (tier.live_gain_db / 20)
