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

import json
from dataclasses import dataclass, field
from pathlib import Path

from service.pipeline.contract import StageSpec, _digest, stateless_stage
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


@dataclass(frozen=True)
class MotionTier:
    name: str
    version: str
    path: Path
    width: int
    height: int
    sample_rate: int
    head: StageSpec
    settings: HeadSettings
    vocoder: StageSpec
    voice: VocoderSettings
    digest: str = ""
    kind: str = KIND
    live_gain_db: float = 0.0  # as service.pipeline.tier.Tier
    gpu_precision: dict[str, str] = field(default_factory=dict)  # as service.pipeline.tier.Tier

    @property
    def stages(self) -> tuple[StageSpec, StageSpec]:
        return (self.head, self.vocoder)

    @property
    def letterbox(self) -> bool:
        return True

    @property
    def model_fps(self) -> None:
        return None

    @property
    def lookahead_frames(self) -> int:
        return AHEAD

    @property
    def materials(self) -> tuple[str, ...]:
        return self.voice.materials

    def num_samples(self, duration_s: float) -> int:
        return round(duration_s * self.sample_rate)


def load_motion_tier(models_dir: Path, tier: str) -> MotionTier:
    path = Path(models_dir) / tier
    config_file = path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"tier {tier!r}: no config.json in {path}")
    raw = json.loads(config_file.read_text())
    if raw.get("kind") != KIND:
        raise ValueError(f"tier {tier!r} is not a {KIND} tier")
    stages, video = raw["stages"], raw["video"]
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
        name=raw["name"],
        version=raw["version"],
        path=path,
        width=int(video["width"]),
        height=int(video["height"]),
        sample_rate=int(raw["audio"]["sample_rate"]),
        head=stateless_stage("head", head),
        settings=settings,
        vocoder=stateless_stage("vocoder", vocoder),
        voice=voice,
        digest=_digest(config_file, [path / head["file"], path / vocoder["file"]]),
        live_gain_db=float(raw["audio"].get("live_gain_db", 0.0)),
        gpu_precision=dict(raw.get("gpu", {}).get("precision", {})),
    )
