"""The stage contract of a model tier, read from `<models_dir>/<tier>/config.json`.

Four stages, one direction; T = model video frames, M = T * mels_per_frame acoustic frames,
S = M * hop audio samples:

    preprocess  decoded frames (pts_s, HxWx3 uint8)  -> frames [1, T, 3, H, W] float32 in [0, 1]
                                                        age    [1, T] float32 in [0, 1)
    encoder     frames, age                          -> features [1, T, D] float32
    generator   features                             -> mel    [1, M, n_mels] float32 (log mel)
                                                        onset  [1, M] probability a contact starts
                                                        events [1, M] 1 where a contact sound fires
    vocoder     mel                                  -> audio [1, S] float32 in [-1, 1]

Model frame k stands for the time `t0 + k / fps`, t0 being the first video frame's presentation
time; acoustic frame m owns samples [m * hop, (m + 1) * hop). Every stage is time-invariant with a
bounded receptive field (`left_context`, `right_context`, in that stage's input frames).

Every stage streams: besides its inputs, its graph takes a `state_<name>` tensor per entry of
its `state` and returns the next one as `next_<name>`, so consecutive calls on consecutive
frames give exactly what one call on all of them gives. A stream starts from zero state, with
one rule for a stage that looks ahead (`right_context` L > 0): its state `history` holds its last
inputs, and a stream writes its first L input frames into the end of `history` instead of
passing them, then ends with L frames of zeros (the padding after a clip). Its output lags its
input by L frames. `service.pipeline.streaming` runs this.

The config is written by `engines.export` from the trained model; nothing here is a default for a
model hyperparameter.

What every kind of tier states (`TierHeader`) and how its config is read (`read_config`,
`header`) are here too: the event kinds (`EventTier`: service.pipeline.contacts.tier,
service.pipeline.motion.tier) build on them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class StageSpec:
    name: str
    file: str
    inputs: dict[str, list[int | str]]
    outputs: dict[str, list[int | str]]
    state: dict[str, list[int | str]]
    left_context: int
    right_context: int

    @property
    def graph_inputs(self) -> set[str]:
        """The graph's input names: the stage's inputs and `state_<name>` per state tensor."""
        return set(self.inputs) | {f"state_{name}" for name in self.state}


class StagedTier(Protocol):
    """What a backend reads of a tier, whatever its kind: its name, folder and stages."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def stages(self) -> tuple[StageSpec, ...]: ...


@dataclass(frozen=True)
class MelSpec:
    n_mels: int
    n_fft: int
    fmin: float
    fmax: float
    log_floor: float


@dataclass(frozen=True, kw_only=True)
class TierHeader:
    """What every kind of tier states besides its stages (service.pipeline.tier.Tier says what
    each field means)."""

    name: str
    version: str
    path: Path
    width: int
    height: int
    sample_rate: int
    digest: str = ""
    live_gain_db: float = 0.0
    gpu_precision: dict[str, str] = field(default_factory=dict)

    def num_samples(self, duration_s: float) -> int:
        return round(duration_s * self.sample_rate)


@dataclass(frozen=True, kw_only=True)
class TierConfig(TierHeader):
    fps: int
    hop: int
    mel: MelSpec
    feature_dim: int
    encoder: StageSpec
    generator: StageSpec
    vocoder: StageSpec
    kind: str = "frames"  # model frames at a fixed rate (the event kinds: EventTier)

    @property
    def mels_per_frame(self) -> int:
        return self.sample_rate // (self.hop * self.fps)

    @property
    def samples_per_frame(self) -> int:
        return self.sample_rate // self.fps

    @property
    def stages(self) -> tuple[StageSpec, StageSpec, StageSpec]:
        return (self.encoder, self.generator, self.vocoder)

    @property
    def letterbox(self) -> bool:
        """Whether frames keep their shape inside the picture (False: stretched to it)."""
        return False

    @property
    def model_fps(self) -> int:
        return self.fps

    @property
    def lookahead_frames(self) -> int:
        return self.generator.right_context

    def num_frames(self, duration_s: float) -> int:
        """Model frames covering `duration_s` (the last one may be partial)."""
        return max(1, math.ceil(duration_s * self.fps - 1e-6))


@dataclass(frozen=True, kw_only=True)
class EventTier(TierHeader):
    """The rules the event kinds (contacts, motion) share: the picture keeps its shape, each
    frame is taken at its own time."""

    @property
    def letterbox(self) -> bool:
        return True

    @property
    def model_fps(self) -> None:
        return None


def _stage(name: str, raw: dict[str, Any]) -> StageSpec:
    return StageSpec(
        name=name,
        file=raw["file"],
        inputs=raw["inputs"],
        outputs=raw["outputs"],
        state=raw["state"],
        left_context=int(raw["left_context"]),
        right_context=int(raw["right_context"]),
    )


STAGE_NAMES = ("encoder", "generator", "vocoder")


def stateless_stage(name: str, raw: dict[str, Any]) -> StageSpec:
    """A stage of an event tier's config.json: one graph, no carried state, no context."""
    return StageSpec(name, raw["file"], raw["inputs"], raw["outputs"], {}, 0, 0)


def read_config(models_dir: Path, tier: str, kind: str | None = None) -> dict[str, Any]:
    """The tier's config.json; `kind`: the kind it must state (None: any)."""
    config_file = Path(models_dir) / tier / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"tier {tier!r}: no config.json in {config_file.parent}")
    raw: dict[str, Any] = json.loads(config_file.read_text())
    if kind is not None and raw.get("kind", "frames") != kind:
        raise ValueError(f"tier {tier!r} is not a {kind} tier")
    return raw


def header(models_dir: Path, tier: str, raw: dict[str, Any], graphs: list[str]) -> dict[str, Any]:
    """`raw`'s TierHeader, as the keywords of a tier's fields; `graphs`: its stages' files, which
    the digest covers with the config."""
    path = Path(models_dir) / tier
    audio, video = raw["audio"], raw["video"]
    return dict(
        name=raw["name"],
        version=raw["version"],
        path=path,
        width=int(video["width"]),
        height=int(video["height"]),
        sample_rate=int(audio["sample_rate"]),
        digest=_digest(path / "config.json", [path / g for g in graphs]),
        live_gain_db=float(audio.get("live_gain_db", 0.0)),
        gpu_precision=dict(raw.get("gpu", {}).get("precision", {})),
    )


def _digest(config_file: Path, graphs: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in (config_file, *graphs):
        digest.update(path.read_bytes() if path.is_file() else b"missing")
    return digest.hexdigest()[:16]


def load_frames_tier(models_dir: Path, tier: str) -> TierConfig:
    raw = read_config(models_dir, tier, "frames")
    audio, stages = raw["audio"], raw["stages"]
    config = TierConfig(
        **header(models_dir, tier, raw, [stages[name]["file"] for name in STAGE_NAMES]),
        fps=int(raw["video"]["fps"]),
        hop=int(audio["hop"]),
        mel=MelSpec(
            n_mels=int(audio["n_mels"]),
            n_fft=int(audio["mel_n_fft"]),
            fmin=float(audio["mel_fmin"]),
            fmax=float(audio["mel_fmax"]),
            log_floor=float(audio["log_floor"]),
        ),
        feature_dim=int(raw["feature_dim"]),
        encoder=_stage("encoder", stages["encoder"]),
        generator=_stage("generator", stages["generator"]),
        vocoder=_stage("vocoder", stages["vocoder"]),
    )
    if config.sample_rate % (config.hop * config.fps):
        raise ValueError(f"tier {tier!r}: sample_rate must be a multiple of hop * fps")
    return config
