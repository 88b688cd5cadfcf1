"""What a training run does: steps, batches, crops, loss weights. The defaults are one round of
the shipped weights' recipe (engines.build, docs/model-card.md): onset targets on every seen
impact, each impact event's level learned from its own sound, and a tenth of the crops replaced
by scenes where nothing sounds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainOptions:
    vocoder_steps: int = 2000
    generator_steps: int = 4000
    vocoder_batch: int = 12
    generator_batch: int = 8
    crop_frames: int = 80  # video frames per generator crop (2.7 s)
    # The first frames of a crop get no mel loss: ringing from contacts before the crop is in the
    # target but its events are not in the input.
    warmup_frames: int = 16
    onset_weight: float = 1.0
    augment_p: float = 0.7  # share of crops given a random zoom, shift, squash and exposure
    # Two options that go together: onset targets on every impact of at least SEEN_IMPULSE_NS
    # (engines.train.data), heard or not, and a loss on each impact event's emitted level
    # against the impact's own sound (TrainClip.impact_level), so that events under the ringing
    # of earlier ones are as quiet as the real ones. 0 = no level loss.
    seen_impacts: bool = True
    level_weight: float = 0.2
    # Share of generator crops replaced by a procedural scene where nothing sounds
    # (engines.train.distractors), drawn from a pool of distractor_pool made at the start.
    distractor_p: float = 0.1
    distractor_pool: int = 160
    vocoder_crop_frames: int = 24  # video frames per vocoder crop (0.8 s)
    lr: float = 2e-3
    seed: int = 0
