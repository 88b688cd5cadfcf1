"""Physically modelled contact sounds synthesised from simulation ground truth (48 kHz).

synthesize(clip, sample_rate=48000, seed=0) -> float32 audio aligned with clip frame 0
"""

from engines.audio.render import synthesize

__all__ = ["synthesize"]
