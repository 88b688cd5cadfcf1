"""The contract of a `contacts` tier, read from `<models_dir>/<tier>/config.json` (kind "contacts";
written by engines.export.contacts):

    localiser  frames, previous [B, 3, H, W] float32 in [0, 1] (the picture letterboxed into
               H x W; `previous` is the frame before, or the frame itself at a stream's start
               and after a shot cut) -> the K strongest objects per frame: score [B, K],
               xy [B, K, 2] model pixels, radius [B, K] model pixels, materials [B, K, M],
               size [B, K] metres
    head       features [N, F] (service.pipeline.contacts.features) -> probability [N] that a
               contact happens in the interval, u [N]: when, in units of the interval from its
               start
    strength   weights of the impulse estimate (service.pipeline.contacts.strength)
    renderer   per object material: its modes at voice_size_m, hardness and loudness
               (service.pipeline.contacts.render)

Frames are taken at their own presentation times; nothing is resampled to a fixed rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.pipeline.contacts.features import HeadConfig
from service.pipeline.contacts.strength import NAMES, StrengthModel, design
from service.pipeline.contract import EventTier, StageSpec, header, read_config, stateless_stage

KIND = "contacts"


@dataclass(frozen=True)
class Voice:
    material: str
    freqs_hz: tuple[float, ...]
    decays: tuple[float, ...]  # 1/s
    amps: tuple[float, ...]
    contact_ms: float
    loudness: float


@dataclass(frozen=True)
class RendererSpec:
    voices: tuple[Voice, ...]  # one per material, in the localiser's material order
    gain: float
    impulse_exponent: float
    click_level: float
    max_ring_s: float
    voice_size_m: float  # the size of object whose modes the voices hold


@dataclass(frozen=True, kw_only=True)
class ContactTier(EventTier):
    localiser: StageSpec
    head: StageSpec
    head_config: HeadConfig
    strength: StrengthModel
    renderer: RendererSpec
    kind: str = KIND

    @property
    def stages(self) -> tuple[StageSpec, StageSpec]:
        return (self.localiser, self.head)

    @property
    def lookahead_frames(self) -> int:
        return self.head_config.lookahead + 2

    @property
    def materials(self) -> tuple[str, ...]:
        return tuple(v.material for v in self.renderer.voices)


def renderer_spec(render: dict[str, Any]) -> RendererSpec:
    """The renderer's part of a tier's config (every tier that renders events has one)."""
    voices = tuple(
        Voice(
            v["material"],
            tuple(v["freqs_hz"]),
            tuple(v["decays"]),
            tuple(v["amps"]),
            float(v["contact_ms"]),
            float(v["loudness"]),
        )
        for v in render["voices"]
    )
    return RendererSpec(
        voices,
        float(render["gain"]),
        float(render["impulse_exponent"]),
        float(render["click_level"]),
        float(render["max_ring_s"]),
        float(render["voice_size_m"]),
    )


def load_contact_tier(models_dir: Path, tier: str, *, strength: bool = True) -> ContactTier:
    """`strength=False`: the tier before its impulse estimate is fitted (the fitter's own use;
    every event then has impulse 1)."""
    raw = read_config(models_dir, tier, KIND)
    stages = raw["stages"]
    fitted = "strength" in stages and tuple(stages["strength"]["features"]) == NAMES
    if strength and not fitted:
        raise ValueError(
            f"tier {tier!r}: no impulse estimate for these features in its config.json "
            "(python -m engines.tracks.strength --write)"
        )
    renderer = renderer_spec(stages["renderer"])
    return ContactTier(
        **header(models_dir, tier, raw, [stages[n]["file"] for n in ("localiser", "head")]),
        localiser=stateless_stage("localiser", stages["localiser"]),
        head=stateless_stage("head", stages["head"]),
        head_config=HeadConfig(**stages["head"]["config"]),
        strength=StrengthModel(
            tuple(stages["strength"]["weights"])
            if fitted
            else (0.0,) * len(design(np.zeros(4), 0, len(renderer.voices)))
        ),
        renderer=renderer,
    )
