"""The contract of a `motion` tier, read from `<models_dir>/<tier>/config.json` (kind "motion";
written by engines.motion.export):

    head      windows [B, WINDOW * CHANNELS, H / 4, W / 4] (service.pipeline.motion.window)
              -> probability, u, strength [B, H / 8, W / 8], material [B, M, H / 8, W / 8]
              config: threshold (the probability an event needs), offset_s (added to every
              event: the picture's delay against its sound, one for all clips), the strength
              an impulse of 1 N s has, and the material probability below which a contact's
              material is not named
    renderer  per material: its modes, hardness and loudness (service.pipeline.contacts.render)

The picture is the video letterboxed into width x height at its frames' own times; nothing is
resampled to a fixed rate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from service.pipeline.contacts.tier import RendererSpec, renderer_spec
from service.pipeline.contract import StageSpec, _digest
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
class MotionTier:
    name: str
    version: str
    path: Path
    width: int
    height: int
    sample_rate: int
    head: StageSpec
    settings: HeadSettings
    renderer: RendererSpec
    digest: str = ""
    kind: str = KIND
    live_gain_db: float = 0.0  # as service.pipeline.tier.Tier
    gpu_precision: dict[str, str] = field(default_factory=dict)  # as service.pipeline.tier.Tier

    @property
    def stages(self) -> tuple[StageSpec]:
        return (self.head,)

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
        return tuple(v.material for v in self.renderer.voices)

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
    head = stages["head"]
    renderer = renderer_spec(stages["renderer"])
    settings = HeadSettings(**head["config"])
    if settings.default_material not in [v.material for v in renderer.voices]:
        raise ValueError(f"tier {tier!r}: no voice for {settings.default_material!r}")
    return MotionTier(
        name=raw["name"],
        version=raw["version"],
        path=path,
        width=int(video["width"]),
        height=int(video["height"]),
        sample_rate=int(raw["audio"]["sample_rate"]),
        head=StageSpec("head", head["file"], head["inputs"], head["outputs"], {}, 0, 0),
        settings=settings,
        renderer=renderer,
        digest=_digest(config_file, [path / head["file"]]),
        live_gain_db=float(raw["audio"].get("live_gain_db", 0.0)),
        gpu_precision=dict(raw.get("gpu", {}).get("precision", {})),
    )
