"""Training clips in memory: model-rate frames (through the service's own preprocess), log-mel
targets, onset targets and the ground-truth waveform, all on the stage contract's clock."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engines.audio.render import GAIN, impact_sounds
from engines.data.dataset import ClipRecord, impacts_of
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
    # (T * R, n_mels) float32: the log-mel of the impacts that start in each acoustic frame,
    # each heard alone (without what rings before it), on their first frames; NaN in frames
    # where no impact starts. What an event fired there should emit.
    impact_level: torch.Tensor | None  # None unless asked for
    heard: np.ndarray  # the contacts heard in the track (s): the sync metric's reference onsets


# With `seen_impacts`, impacts at least this strong are onset targets whether the ground-truth
# track lets them be heard or not (the rendered track is to mask them or not by their level).
SEEN_IMPULSE_NS = 0.02


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


def load_clip(
    path: Path, cfg: ModelConfig, mel: LogMel, *, seen_impacts: bool = False, levels: bool = False
) -> TrainClip:
    """`seen_impacts`: every impact of at least SEEN_IMPULSE_NS is an onset target, not only the
    contacts heard in the track; `levels`: fill in `impact_level`."""
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
    # By default only contacts a listener hears fire events: the model is not asked to see a
    # resting object's inaudible rattle, and the targets are the evaluation's reference onsets.
    starts = [record.impacts["time_s"].astype(np.float64)]
    for pair in range(len(record.slide_speed)):
        starts.append(
            motion_starts(record.track_times_s, record.slide_speed[pair], record.roll_speed[pair])
        )
    heard = audible(np.sort(np.concatenate(starts)), audio, cfg.sample_rate)
    targets = [heard]
    if seen_impacts:
        targets.append(record.impacts["time_s"][record.impacts["impulse_ns"] >= SEEN_IMPULSE_NS])
    index = np.floor(np.concatenate(targets) * cfg.sample_rate / cfg.hop).astype(int)
    onset[index[(index >= 0) & (index < len(onset))]] = 1.0
    audio_t = torch.from_numpy(audio)
    with torch.no_grad():
        target = mel(audio_t[None])[0]
    return TrainClip(
        torch.from_numpy(frames.rgb),
        torch.from_numpy(frames.age),
        target,
        torch.from_numpy(onset),
        audio_t,
        impact_levels(record, cfg, mel, len(onset)) if levels else None,
        heard,
    )


def impact_levels(record: ClipRecord, cfg: ModelConfig, mel: LogMel, frames: int) -> torch.Tensor:
    """`TrainClip.impact_level`: each group of impacts starting in one acoustic frame m,
    re-synthesised exactly as the clip's track was (engines.audio.render), with the slide and
    roll sound of the track (what is left of the track once all impacts are taken out: the
    contact noise that starts with many impacts) but without the ringing of earlier impacts.
    Analysed over a span of frames around m; per band the louder of frames m and m + 1."""
    hop = cfg.hop
    span = 8 * hop  # frames m - 2 .. m + 5; the analysis windows of m and m + 1 lie inside
    pad = 2 * hop
    impacts = np.zeros(len(record.audio) + pad + span)
    groups: dict[int, list[tuple[int, np.ndarray]]] = {}
    sounds = impact_sounds(
        impacts_of(record.impacts), sample_rate=cfg.sample_rate, seed=record.seed
    )
    for start, samples in sounds:
        if start // hop >= frames:
            continue
        n = min(len(samples), len(impacts) - pad - start)
        impacts[pad + start : pad + start + n] += GAIN * samples[:n]
        groups.setdefault(start // hop, []).append((start, GAIN * samples))
    # The track is soft-limited (engines.audio.render), nearly linear at these levels.
    tracks = np.zeros_like(impacts)
    tracks[pad : pad + len(record.audio)] = record.audio - impacts[pad : pad + len(record.audio)]
    out = torch.full((frames, cfg.n_mels), float("nan"))
    for m, members in groups.items():
        first = m * hop  # the buffer's sample 0 is the clip's sample (m - 2) * hop
        buffer = tracks[first : first + span].copy()
        for start, samples in members:
            offset = start - (m - 2) * hop
            n = min(len(samples), span - offset)
            buffer[offset : offset + n] += samples[:n]
        with torch.no_grad():
            levels = mel(torch.from_numpy(buffer).float()[None])[0]
        out[m] = levels[2:4].amax(dim=0)
    return out


def load_clips(
    data_dir: Path,
    cfg: ModelConfig,
    limit: int | None = None,
    *,
    seen_impacts: bool = False,
    levels: bool = False,
) -> list[TrainClip]:
    """The clips of `data_dir` (the first `limit`); the flags as in `load_clip`."""
    paths = sorted(Path(data_dir).glob("*.npz"))[:limit]
    if not paths:
        raise FileNotFoundError(f"no .npz clips in {data_dir}")
    mel = log_mel(cfg)
    clips = [load_clip(p, cfg, mel, seen_impacts=seen_impacts, levels=levels) for p in paths]
    log.info("loaded %d clips from %s", len(clips), data_dir)
    return clips
