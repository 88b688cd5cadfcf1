"""Training clips in memory: model-rate frames (through the service's own preprocess), log-mel
targets, onset targets and the ground-truth waveform, all on the stage contract's clock."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engines.data.dataset import load_clip as read_clip
from engines.eval.reference import audible, motion_starts
from engines.models.config import ModelConfig
from engines.models.mel import LogMel
from service.pipeline.preprocess import resample_clip

log = logging.getLogger(__name__)


@dataclass
class TrainClip:
    rgb: torch.Tensor  # (T, H, W, 3) uint8
    age: torch.Tensor  # (T,) float32
    mel: torch.Tensor  # (T * R, n_mels) float32
    onset: torch.Tensor  # (T * R,) float32 in {0, 1}
    audio: torch.Tensor  # (T * samples_per_frame,) float32
    # (T, O, 2) float32: the objects' centres in the source frame each model frame shows, in
    # normalised device coordinates (NaN behind the camera); see engines.train.motion.
    screen: torch.Tensor


def log_mel(cfg: ModelConfig) -> LogMel:
    return LogMel(
        sample_rate=cfg.sample_rate,
        hop=cfg.hop,
        n_fft=cfg.mel_n_fft,
        n_mels=cfg.n_mels,
        fmin=cfg.mel_fmin,
        fmax=cfg.mel_fmax,
        log_floor=cfg.log_floor,
    )


def load_clip(path: Path, cfg: ModelConfig, mel: LogMel) -> TrainClip:
    record = read_clip(path)
    if record.sample_rate != cfg.sample_rate:
        raise ValueError(
            f"{path}: {record.sample_rate} Hz audio, the model wants {cfg.sample_rate}"
        )
    num_frames = max(1, int(np.ceil(record.duration_s * cfg.fps - 1e-6)))
    frames = resample_clip(record.times_s, record.frames, fps=cfg.fps, num_frames=num_frames)
    spf = cfg.sample_rate // cfg.fps
    audio = np.zeros(num_frames * spf, np.float32)
    src = record.audio[: len(audio)]
    audio[: len(src)] = src
    onset = np.zeros(num_frames * cfg.mels_per_frame, np.float32)
    # Only contacts a listener hears fire events: the model is not asked to see a resting
    # object's inaudible rattle, and the targets are the evaluation's reference onsets.
    starts = [record.impacts["time_s"].astype(np.float64)]
    for pair in range(len(record.slide_speed)):
        starts.append(
            motion_starts(record.track_times_s, record.slide_speed[pair], record.roll_speed[pair])
        )
    heard = audible(np.sort(np.concatenate(starts)), audio, cfg.sample_rate)
    index = np.floor(heard * cfg.sample_rate / cfg.hop).astype(int)
    onset[index[(index >= 0) & (index < len(onset))]] = 1.0
    # Model frame j shows the source frame captured age[j] model frames before j / fps.
    shown = (np.arange(num_frames) - frames.age) / cfg.fps
    source = np.clip(np.searchsorted(record.times_s, shown - 1e-6), 0, len(record.times_s) - 1)
    audio_t = torch.from_numpy(audio)
    with torch.no_grad():
        target = mel(audio_t[None])[0]
    return TrainClip(
        torch.from_numpy(frames.rgb),
        torch.from_numpy(frames.age),
        target,
        torch.from_numpy(onset),
        audio_t,
        torch.from_numpy(record.screen_xy[source]),
    )


def load_clips(data_dir: Path, cfg: ModelConfig, limit: int | None = None) -> list[TrainClip]:
    paths = sorted(Path(data_dir).glob("*.npz"))[:limit]
    if not paths:
        raise FileNotFoundError(f"no .npz clips in {data_dir}")
    mel = log_mel(cfg)
    clips = [load_clip(p, cfg, mel) for p in paths]
    log.info("loaded %d clips from %s", len(clips), data_dir)
    return clips
