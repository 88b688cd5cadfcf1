"""Scoring a trained encoder and generator on whole clips: the onset heads' F1 against the
contact frames (validation during training), and the onset trigger calibrated on the rendered,
vocoded track (the sync evaluation's own measure), which is stored in the generator."""

from __future__ import annotations

import logging

import numpy as np
import torch

from engines.eval.onsets import OnsetScore, combined, detect_onsets, match_onsets
from engines.models.config import ModelConfig
from engines.train.data import TrainClip

log = logging.getLogger(__name__)

# The onset thresholds `calibrate_trigger` tries.
TRIGGERS = tuple(np.round(np.arange(0.15, 0.8, 0.05), 2).tolist())

Heads = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def clip_heads(
    encoder: torch.nn.Module, generator: torch.nn.Module, clips: list[TrainClip]
) -> Heads:
    """Per clip, the generator's heads over its whole length (Generator.heads: the acoustic-rate
    trunk, the onset logits, the offset logits)."""
    heads = []
    with torch.no_grad():
        for clip in clips:
            frames = clip.rgb.permute(0, 3, 1, 2).float()[None] / 255.0
            heads.append(generator.heads(encoder(frames, clip.age[None])))
    return heads


def onset_score(
    generator: torch.nn.Module,
    heads: Heads,
    clips: list[TrainClip],
    cfg: ModelConfig,
    trigger: float | None = None,
) -> OnsetScore:
    """Events fired from `heads` against each clip's contact onsets (TrainClip.onset), matched
    within +-50 ms (the sync metric, without the vocoder and the detector)."""
    seconds = cfg.hop / cfg.sample_rate
    scores = []
    with torch.no_grad():
        for (_, onset_logit, offset_logit), clip in zip(heads, clips, strict=True):
            fired = np.flatnonzero(generator.fire(onset_logit, offset_logit, trigger)[0].numpy())
            truth = np.flatnonzero(clip.onset.numpy())
            scores.append(match_onsets(fired * seconds, truth * seconds))
    return combined(scores)


def calibrate_trigger(
    encoder: torch.nn.Module,
    generator: torch.nn.Module,
    vocoder: torch.nn.Module,
    clips: list[TrainClip],
    cfg: ModelConfig,
) -> float:
    """The onset threshold with the best sync score on `clips`, measured as the sync evaluation
    does: fire events, render the mel, vocode it, detect onsets in the audio and match them to
    the contacts heard in the clip's own track. Events under the ringing of louder ones are not
    heard in the rendered track either, so this is the threshold for the track, not for the
    events. Stored in the generator, so exported with it."""
    with torch.no_grad():
        runs = clip_heads(encoder, generator, clips)
        best = (-1.0, 0.5)
        for threshold in TRIGGERS:
            scores = []
            for clip, (x, onset_logit, offset_logit) in zip(clips, runs, strict=True):
                events = generator.fire(onset_logit, offset_logit, threshold)
                mel, _ = generator.render(x, onset_logit, offset_logit, events)
                audio = vocoder(mel)[0].numpy()
                scores.append(match_onsets(detect_onsets(audio, cfg.sample_rate), clip.heard))
            score = combined(scores)
            log.info(
                "trigger %.2f: sync F1 %.3f (P %.3f, R %.3f)",
                threshold,
                score.f1,
                score.precision,
                score.recall,
            )
            best = max(best, (score.f1, threshold))
    generator.trigger.fill_(best[1])
    return best[1]
