"""Hyperparameters of the reference model, one dataclass per tier; the export writes them into the
tier's config.json, which is the only place the service reads them from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from engines.models.encoder import VisualEncoder
from engines.models.generator import Generator
from engines.models.vocoder import Vocoder

# Fields of study options that were tried and not kept (docs/experiments.md). Configs written
# before they left (a tier's config.json, a checkpoint) may still carry them, at 0 (off): such a
# config loads as the model it describes; one with an option on describes a model this code no
# longer builds, and is refused.
RETIRED_FIELDS = ("encoder_glimpses", "encoder_materials", "encoder_keypoints")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "preview"
    version: str = "0.1.0"
    fps: int = 30
    width: int = 96
    height: int = 96
    sample_rate: int = 48000
    hop: int = 400  # 120 acoustic frames per second: 4 per video frame, 8.3 ms each
    n_mels: int = 64
    mel_n_fft: int = 1600
    mel_fmin: float = 0.0
    mel_fmax: float = 24000.0
    log_floor: float = 1e-5
    feature_dim: int = 96
    # The visual encoder's widths: its patch embedding, then one stride-2 convolution each.
    encoder_channels: tuple[int, ...] = (24, 32, 48, 64)
    generator_dim: int = 128
    # Video frames the generator sees past the one it renders: latency for a live stream.
    generator_lookahead: int = 1
    # Hidden width of the generator's ConvNeXt MLPs, as a multiple of their width; structured
    # pruning (engines.export.prune) lowers it.
    generator_expand: float = 3.0
    vocoder_dim: int = 128
    vocoder_hidden: int = 384
    vocoder_blocks: int = 4

    @property
    def mels_per_frame(self) -> int:
        return self.sample_rate // (self.hop * self.fps)

    def build(self) -> tuple[VisualEncoder, Generator, Vocoder]:
        encoder = VisualEncoder(
            height=self.height,
            width=self.width,
            dim=self.feature_dim,
            channels=tuple(self.encoder_channels),
        )
        generator = Generator(
            feature_dim=self.feature_dim,
            n_mels=self.n_mels,
            mels_per_frame=self.mels_per_frame,
            frame_rate=self.sample_rate / self.hop,
            dim=self.generator_dim,
            expand=self.generator_expand,
            log_floor=self.log_floor,
            lookahead=self.generator_lookahead,
        )
        vocoder = Vocoder(
            n_mels=self.n_mels,
            hop=self.hop,
            dim=self.vocoder_dim,
            hidden=self.vocoder_hidden,
            blocks=self.vocoder_blocks,
        )
        return encoder, generator, vocoder

    def with_vocoder_of(self, other: ModelConfig) -> ModelConfig:
        """This config with `other`'s vocoder size: for a checkpoint given another's vocoder."""
        return replace(
            self,
            vocoder_dim=other.vocoder_dim,
            vocoder_hidden=other.vocoder_hidden,
            vocoder_blocks=other.vocoder_blocks,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """The inverse of `to_dict`, also for a dict read back from JSON (lists for tuples) and
        for one written with the retired fields (RETIRED_FIELDS) off."""
        values = dict(values)
        for name in RETIRED_FIELDS:
            if values.pop(name, 0):
                raise ValueError(
                    f"the model was built with {name} on, a study option this code no longer "
                    "builds (docs/experiments.md)"
                )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model config fields: {', '.join(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
