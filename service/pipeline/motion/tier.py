"""The contract of a `motion` tier, read from `<models_dir>/<tier>/config.json` (kind "motion";
written by engines.motion.export):

    head      windows [B, WINDOW * CHANNELS, H / 4, W / 4] (service.pipeline.motion.window)
              -> probability, u, strength [B, H / 8, W / 8], material [B, M, H / 8, W / 8]
              config: threshold (the probability an event needs), offset_s (added to every
              event: the picture's delay against its sound, one for all clips), the strength
              an impulse of 1 N s has, and the material probability below which a contact's
              material is not named
    vocoder   conditioning [B, M + 1] (a contact's material one-hot and log impulse)
              -> amps, decays [B, K], click, click_s [B]: the modal bank that voices it
              (engines.motion.vocoder); config: the materials, the bank's mode frequencies,
              the impulse exponent, the log impulse range, the longest ring and the mix's gain

The picture is the video letterboxed into width x height at its frames' own times; nothing is
resampled to a fixed rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service.pipeline.contract import EventTier, StageSpec, header, read_config, stateless_stage
from service.pipeline.motion.window import AHEAD

KIND = "motion"


@dataclass(frozen=True)
class HeadSettings:
    threshold: float
    offset_s: float
    reference_strength: float  # the head's strength of a 1 N s impulse
    material_confidence: float
    default_material: str  # the voice of a contact whose material is not named


@dataclass(frozen=True)
class VocoderSettings:
    materials: tuple[str, ...]  # the head's and the conditioning's order
    freqs_hz: tuple[float, ...]  # the bank's modes
    impulse_exponent: float  # the excitation: impulse ** this
    log_impulse_range: tuple[float, float]  # the conditioning's log impulse is clipped to it
    max_ring_s: float
    gain: float  # the mix's scale before the limiter


@dataclass(frozen=True, kw_only=True)
class MotionTier(EventTier):
    head: StageSpec
    settings: HeadSettings
    vocoder: StageSpec
    voice: VocoderSettings
    kind: str = KIND

    @property
    def stages(self) -> tuple[StageSpec, StageSpec]:
        return (self.head, self.vocoder)

    @property
    def lookahead_frames(self) -> int:
        return AHEAD

    @property
    def materials(self) -> tuple[str, ...]:
        return self.voice.materials


def load_motion_tier(models_dir: Path, tier: str) -> MotionTier:
    raw = read_config(models_dir, tier, KIND)
    stages = raw["stages"]
    head, vocoder = stages["head"], stages["vocoder"]
    settings = HeadSettings(**head["config"])
    v = vocoder["config"]
    voice = VocoderSettings(
        materials=tuple(v["materials"]),
        freqs_hz=tuple(float(f) for f in v["freqs_hz"]),
        impulse_exponent=float(v["impulse_exponent"]),
        log_impulse_range=(float(v["log_impulse_range"][0]), float(v["log_impulse_range"][1])),
        max_ring_s=float(v["max_ring_s"]),
        gain=float(v["gain"]),
    )
    if settings.default_material not in voice.materials:
        raise ValueError(f"tier {tier!r}: no voice for {settings.default_material!r}")
    return MotionTier(
        **header(models_dir, tier, raw, [head["file"], vocoder["file"]]),
        head=stateless_stage("head", head),
        settings=settings,
        vocoder=stateless_stage("vocoder", vocoder),
        voice=voice,
    )
