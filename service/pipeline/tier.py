"""A tier: what every transport reads of a model, whatever its stages. Loaded once from
`<models_dir>/<name>/config.json` (`load_tier`); its stages' own contracts are in
service.pipeline.contract (kind "frames"), service.pipeline.contacts.tier ("contacts") and
service.pipeline.motion.tier ("motion")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from service.pipeline.contacts.tier import ContactTier, load_contact_tier
from service.pipeline.contract import StageSpec, TierConfig, load_frames_tier, read_config
from service.pipeline.motion.tier import MotionTier, load_motion_tier


class Tier(Protocol):
    """The stages, input picture, lookahead and rates of a loaded tier. Read-only (properties):
    the tiers are frozen dataclasses."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def kind(self) -> str: ...
    # SHA-256 (first 16 hex digits) of config.json and the graphs: what caches key results on,
    # so that retrained weights shipped under an unchanged version never meet old entries.
    @property
    def digest(self) -> str: ...
    @property
    def width(self) -> int: ...  # the picture the stages read
    @property
    def height(self) -> int: ...
    @property
    def sample_rate(self) -> int: ...  # the audio they make
    # The live preview's gain (service.media.loudness.LiveLevel), calibrated against offline
    # renders by engines.eval.loudness; 0 until calibrated.
    @property
    def live_gain_db(self) -> float: ...
    # Each stage's float precision on a GPU (the cuda backend), chosen by measuring its effect on
    # the rendered track (engines.eval.precision); a stage not named runs in fp32.
    @property
    def gpu_precision(self) -> dict[str, str]: ...

    @property
    def stages(self) -> tuple[StageSpec, ...]: ...

    @property
    def letterbox(self) -> bool:
        """Whether frames keep their shape inside the picture (False: stretched to it)."""
        ...

    @property
    def model_fps(self) -> int | None:
        """The frame rate the stages run at; None: each frame at its own time."""
        ...

    @property
    def lookahead_frames(self) -> int:
        """Frames after a moment that must be in before its audio is final."""
        ...

    def num_samples(self, duration_s: float) -> int: ...


LOADERS: dict[str, Callable[[Path, str], TierConfig | ContactTier | MotionTier]] = {
    "frames": load_frames_tier,
    "contacts": load_contact_tier,
    "motion": load_motion_tier,
}


def load_tier(models_dir: Path, name: str) -> TierConfig | ContactTier | MotionTier:
    """The tier `name` of the folder `models_dir`, by the kind its config states."""
    kind = read_config(models_dir, name).get("kind", "frames")
    if kind not in LOADERS:
        raise ValueError(f"tier {name!r}: unknown kind {kind!r} (known: {', '.join(LOADERS)})")
    return LOADERS[kind](Path(models_dir), name)
