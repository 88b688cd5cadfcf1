"""Train the reference model's three stages on simulated clips.

    python -m engines.train.train --data data/train --out runs/preview

The vocoder learns ground-truth mel -> ground-truth waveform; the encoder and generator learn
frames -> ground-truth mel (+ onset probability). They train separately, then chain at inference.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from engines.eval.onsets import OnsetScore, combined, detect_onsets, match_onsets
from engines.models.checkpoint import checkpoint_config, load_stage, save_checkpoint
from engines.models.config import ModelConfig
from engines.sim.materials import MATERIAL_NAMES
from engines.train.data import TrainClip, load_clips, log_mel
from engines.train.distractors import distractor_clip
from engines.train.keypoints import keypoint_error, keypoint_loss, picture_positions
from engines.train.losses import multi_resolution_stft_loss
from engines.train.material import NO_IMPACT, MaterialHead, material_accuracy, material_loss
from engines.train.motion import MotionHead, crop_screen, motion_loss, motion_targets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainOptions:
    vocoder_steps: int = 2000
    generator_steps: int = 4000
    vocoder_batch: int = 12
    generator_batch: int = 8
    crop_frames: int = 80  # video frames per generator crop (2.7 s)
    # The first frames of a crop get no mel loss: ringing from contacts before the crop is in the
    # target but its events are not in the input.
    warmup_frames: int = 16
    onset_weight: float = 1.0
    augment_p: float = 0.7  # share of crops given a random zoom, shift, squash and exposure
    # The dense motion targets (engines.train.motion); 0 = off. At 1.0 they did not raise the
    # onset F1 (docs/experiments.md), so the shipped recipe leaves them off.
    motion_weight: float = 0.0
    # Two options that go together, on in the shipped recipe (engines.build): onset
    # targets on every impact of at least SEEN_IMPULSE_NS, heard or not, and a loss on each
    # impact event's emitted level against the impact's own sound (TrainClip.impact_level), so
    # that events under the ringing of earlier ones are as quiet as the real ones.
    seen_impacts: bool = False
    level_weight: float = 0.0
    # A loss on how each impact event rings down, band by band, against the impact's own sound
    # alone (TrainClip.decay), where materials differ most. 0 = off; at 0.3 it did not make the
    # material heard (docs/experiments.md), so the shipped recipe leaves it off.
    decay_weight: float = 0.0
    # A loss putting the encoder's keypoints on the objects (engines.train.keypoints); needs an
    # encoder with keypoints. 0 = off.
    keypoint_weight: float = 0.0
    # Material targets at impact frames (engines.train.material), on the encoder's own readout
    # where it has one, else on the trunk; 0 = off. On the trunk, at 0.3, the surface was
    # learned but not the object; on the encoder's readout, at 0.5, the object was named for
    # 44 % of impacts but sync fell (docs/experiments.md), so the shipped recipe leaves it off.
    material_weight: float = 0.0
    # Share of generator crops replaced by a procedural scene where nothing sounds
    # (engines.train.distractors), drawn from a pool of distractor_pool made at the start.
    distractor_p: float = 0.0
    distractor_pool: int = 160
    vocoder_crop_frames: int = 24  # video frames per vocoder crop (0.8 s)
    lr: float = 2e-3
    seed: int = 0


def _crop_starts(
    clips: list[TrainClip], n: int, frames: int, gen: torch.Generator, prefer_sound: bool
) -> list[tuple[TrainClip, int]]:
    picks = []
    while len(picks) < n:
        clip = clips[int(torch.randint(len(clips), (1,), generator=gen))]
        total = len(clip.age)
        if total <= frames:
            continue
        start = int(torch.randint(total - frames, (1,), generator=gen))
        if prefer_sound and float(torch.rand(1, generator=gen)) < 0.8:
            r = clip.mel.shape[0] // total
            if clip.mel[start * r : (start + frames) * r].max() < -9.0:
                continue
        picks.append((clip, start))
    return picks


def one_cycle(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=optimizer.param_groups[0]["lr"], total_steps=steps, pct_start=0.05
    )


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loss: torch.Tensor,
) -> None:
    optimizer.zero_grad()
    loss.backward()
    for group in optimizer.param_groups:
        torch.nn.utils.clip_grad_norm_(group["params"], 1.0)
    optimizer.step()
    scheduler.step()


def train_vocoder(clips: list[TrainClip], cfg: ModelConfig, opts: TrainOptions) -> torch.nn.Module:
    _, _, vocoder = cfg.build()
    mel = log_mel(cfg)
    spf = cfg.sample_rate // cfg.fps
    optimizer = torch.optim.AdamW(vocoder.parameters(), lr=opts.lr, betas=(0.8, 0.99))
    scheduler = one_cycle(optimizer, opts.vocoder_steps)
    gen = torch.Generator().manual_seed(opts.seed)
    started = time.perf_counter()
    for step in range(opts.vocoder_steps):
        picks = _crop_starts(clips, opts.vocoder_batch, opts.vocoder_crop_frames, gen, True)
        audio = torch.stack(
            [c.audio[s * spf : (s + opts.vocoder_crop_frames) * spf] for c, s in picks]
        )
        r = cfg.mels_per_frame
        target_mel = torch.stack(
            [c.mel[s * r : (s + opts.vocoder_crop_frames) * r] for c, s in picks]
        )
        pred = vocoder(target_mel)
        loss = multi_resolution_stft_loss(pred, audio) + F.l1_loss(mel(pred), target_mel) * 0.5
        optimizer_step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.vocoder_steps - 1:
            log.info(
                "vocoder step %d loss %.4f (%.0f s)",
                step,
                loss.item(),
                time.perf_counter() - started,
            )
    return vocoder.eval()


def augment(
    frames: torch.Tensor, p: float, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """frames [B, T, 3, H, W] in [0, 1]: each crop, with probability p, seen through a camera
    that is zoomed (0.8-1.25x), shifted (up to 12 % of the frame), squashed or stretched
    vertically (0.8-1.25x, as a steeper or flatter view foreshortens the floor) and exposed
    differently (gain 0.8-1.2, offset +-0.05). The same for every frame of the crop. Returns
    the frames, each crop's magnification [B, 2] in x and y, and its shift [B, 2] (a point at p
    in the picture's [-1, 1] coordinates is seen at (p - shift) * magnification)."""
    b, t, c, h, w = frames.shape

    def uniform(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(b, generator=gen)

    on = torch.rand(b, generator=gen) < p
    zoom = torch.exp(uniform(-0.22, 0.22))
    squash = torch.exp(uniform(-0.22, 0.22))
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0] = 1 / zoom
    theta[:, 1, 1] = 1 / (zoom * squash)
    theta[:, 0, 2] = uniform(-0.12, 0.12)
    theta[:, 1, 2] = uniform(-0.12, 0.12)
    identity = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    theta = torch.where(on[:, None, None], theta, identity)
    grid = F.affine_grid(theta, [b, c, h, w], align_corners=False)
    grid = grid.repeat_interleave(t, dim=0)
    out = F.grid_sample(
        frames.reshape(b * t, c, h, w), grid, padding_mode="border", align_corners=False
    ).reshape(b, t, c, h, w)
    gain = torch.where(on, uniform(0.8, 1.2), 1.0)[:, None, None, None, None]
    bias = torch.where(on, uniform(-0.05, 0.05), 0.0)[:, None, None, None, None]
    scale = torch.stack([zoom, zoom * squash], dim=1)
    scale = torch.where(on[:, None], scale, 1.0)
    return (out * gain + bias).clamp(0.0, 1.0), scale, theta[:, :, 2]


def onset_losses(
    onset_logit: torch.Tensor, offset_logit: torch.Tensor, onset: torch.Tensor, r: int
) -> torch.Tensor:
    """BCE of the video-rate onset head against "a contact starts in this video frame", plus
    cross-entropy of the offset head against the acoustic frame it starts on (on those frames)."""
    b, t = onset_logit.shape
    per_frame = onset.reshape(b, t, r)
    target = per_frame.amax(dim=-1)
    loss = F.binary_cross_entropy_with_logits(onset_logit, target, pos_weight=torch.tensor(2.0))
    hit = target > 0
    if hit.any():
        where = per_frame.argmax(dim=-1)
        logits = offset_logit.transpose(1, 2)[hit]
        loss = loss + F.cross_entropy(logits, where[hit])
    return loss


def decay_loss(
    generator: torch.nn.Module,
    x: torch.Tensor,
    picks: list[tuple[TrainClip, int]],
    silent: torch.Tensor,
    r: int,
    n: int,
    log_floor: float,
) -> torch.Tensor:
    """L1 between how the impact events of a batch ring down (Generator.event_decays) and how
    their own sound does (TrainClip.decay), both relative to the level at the attack, from the
    third frame on (the first two hold the attack inside the analysis window), in the bands
    where the attack stands 4 nepers above the floor, the target floored as the mel is."""
    rows, frames, targets = [], [], []
    for i, (clip, s) in enumerate(picks):
        if clip.decay_at is None or clip.decay is None:
            raise ValueError("decay_weight needs clips loaded with levels=True")
        inside = (clip.decay_at >= s * r) & (clip.decay_at < (s + n) * r)
        if silent[i] or not inside.any():
            continue
        rows.append(torch.full((int(inside.sum()),), i))
        frames.append(clip.decay_at[inside] - s * r)
        targets.append(clip.decay[inside])
    if not rows:
        return x.new_zeros(())
    target = torch.cat(targets)  # (E, K, n_mels)
    predicted = generator.event_decays(x, torch.cat(rows), torch.cat(frames), target.shape[1])
    floor = math.log(log_floor)
    peak = target[:, :2].amax(dim=1, keepdim=True)
    relative = (target - peak)[:, 2:]
    predicted = torch.maximum(predicted[:, 2:], floor - peak)
    heard = (peak > floor + 4.0).expand_as(relative)
    if not heard.any():
        return x.new_zeros(())
    return F.l1_loss(predicted[heard], relative[heard])


def _materials(clip: TrainClip) -> torch.Tensor:
    if clip.material is None:
        raise ValueError("material_weight needs clips with material targets")
    return clip.material


@dataclass(frozen=True)
class Seen:
    """What the encoder and the generator's trunk make of a whole clip."""

    trunk: torch.Tensor  # the generator's video-rate trunk [1, dim, T]
    materials: torch.Tensor | None  # the encoder's material logits [1, T, 2, K], if it names them
    keypoints: torch.Tensor | None  # the encoder's keypoints [1, T, K, 3], if it has them


def trunks(
    encoder: torch.nn.Module, generator: torch.nn.Module, clips: list[TrainClip]
) -> list[Seen]:
    """Per clip, what the encoder and the trunk make of its whole length."""
    out = []
    with torch.no_grad():
        for clip in clips:
            frames = clip.rgb.permute(0, 3, 1, 2).float()[None] / 255.0
            encoded = encoder.encode(frames, clip.age[None])
            out.append(
                Seen(generator.trunk(encoded.features), encoded.materials, encoded.keypoints)
            )
    return out


def material_logits(
    head: MaterialHead | None, trunk: torch.Tensor, encoded: torch.Tensor | None
) -> torch.Tensor:
    """The material logits [B, T, 2, K] trained and reported: the encoder's own where it names
    the materials, else the training-only head's reading of the trunk."""
    if encoded is not None:
        return encoded
    if head is None:
        raise ValueError("no material readout")
    return head(trunk)


def validation_materials(
    head: MaterialHead | None, seen: list[Seen], clips: list[TrainClip]
) -> tuple[float, float, int]:
    """The material readout's accuracy at the impact frames of `clips` (material_accuracy)."""
    with torch.no_grad():
        logits = torch.cat([material_logits(head, s.trunk, s.materials)[0] for s in seen])
    return material_accuracy(logits, torch.cat([_materials(clip) for clip in clips]))


def _screens(picks: list[tuple[TrainClip, int]], n: int) -> torch.Tensor:
    """The objects' screen positions over each crop and the frames either side of it
    [B, n + 2, O, 2] (`crop_screen`), NaN-padded to the most objects in the batch."""
    objects = max(c.screen.shape[1] for c, _ in picks)
    return torch.stack([crop_screen(c.screen, s, n, objects) for c, s in picks])


def _keypoints(keypoints: torch.Tensor | None) -> torch.Tensor:
    if keypoints is None:
        raise ValueError("keypoint_weight needs an encoder with keypoints (--encoder-keypoints)")
    return keypoints


def validation_keypoints(keypoints: list[torch.Tensor], clips: list[TrainClip]) -> float:
    """`keypoint_error` of each clip's keypoints [1, T, K, 3] over the whole clip, as the
    picture shows it (no flip, no augmentation)."""
    objects = max(c.screen.shape[1] for c in clips)
    screen = torch.cat([crop_screen(c.screen, 0, len(c.screen), objects)[1:-1] for c in clips])
    keypoints = torch.cat([k[0] for k in keypoints])
    none = torch.zeros(1, dtype=torch.bool)
    positions = picture_positions(screen[None], none, torch.ones(1, 2), torch.zeros(1, 2))
    return keypoint_error(keypoints[None], positions)


def _levels(clip: TrainClip) -> torch.Tensor:
    if clip.impact_level is None:
        raise ValueError("level_weight needs clips loaded with levels=True")
    return clip.impact_level


def _warm_start(module: torch.nn.Module, checkpoint: Path, name: str) -> None:
    """Copy the checkpoint stage's tensors whose names and shapes match (new heads start fresh).
    A convolution kernel that grew by taps at its end (more lookahead) takes the checkpoint's as
    its first taps, the new ones zero: the stage starts out computing what the checkpoint's did."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)[name]
    own = module.state_dict()
    same = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    for k, v in state.items():
        mine = own.get(k)
        longer = mine is not None and mine.dim() == v.dim() == 3 and k not in same
        if longer and mine.shape[:2] == v.shape[:2] and mine.shape[2] > v.shape[2]:
            same[k] = torch.cat([v, v.new_zeros(*v.shape[:2], mine.shape[2] - v.shape[2])], 2)
    module.load_state_dict(same, strict=False)
    log.info("%s: %d of %d tensors from %s", name, len(same), len(own), checkpoint)


def train_generator(
    clips: list[TrainClip],
    cfg: ModelConfig,
    opts: TrainOptions,
    init_from: Path | None = None,
    val: list[TrainClip] | None = None,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Encoder and generator together; `init_from` starts from a checkpoint's weights (those
    that fit). `val` clips report the onset F1 every 500 steps."""
    encoder, generator, _ = cfg.build()
    if init_from is not None:
        _warm_start(encoder, init_from, "encoder")
        _warm_start(generator, init_from, "generator")
    motion_head = MotionHead(generator.onset.in_channels)
    # Where the encoder names the materials, they are trained there; else on the trunk.
    material_head = None if encoder.materials else MaterialHead(generator.onset.in_channels)
    params = [
        *encoder.parameters(),
        *generator.parameters(),
        *motion_head.parameters(),
        *(material_head.parameters() if material_head else ()),
    ]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=1e-4)
    scheduler = one_cycle(optimizer, opts.generator_steps)
    gen = torch.Generator().manual_seed(opts.seed + 1)
    r, n = cfg.mels_per_frame, opts.crop_frames
    pool = None
    if opts.distractor_p > 0:
        pool_gen = torch.Generator().manual_seed(opts.seed + 2)
        pool = [
            distractor_clip(n, cfg.height, cfg.width, pool_gen) for _ in range(opts.distractor_pool)
        ]
    started = time.perf_counter()
    for step in range(opts.generator_steps):
        picks = _crop_starts(clips, opts.generator_batch, n, gen, True)
        rgb = torch.stack([c.rgb[s : s + n] for c, s in picks])
        # Crops replaced by a scene where nothing sounds: silence and no contact as targets.
        silent = torch.zeros(len(picks), dtype=torch.bool)
        if pool is not None:
            silent = torch.rand(len(picks), generator=gen) < opts.distractor_p
            for i in torch.nonzero(silent).flatten().tolist():
                rgb[i] = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        # A mirrored scene sounds the same (mono): half the crops are flipped left-right.
        flip = torch.rand(len(picks), generator=gen) < 0.5
        rgb = torch.where(flip[:, None, None, None, None], rgb.flip(3), rgb)
        frames, scale, shift = augment(
            rgb.permute(0, 1, 4, 2, 3).float() / 255.0, opts.augment_p, gen
        )
        age = torch.stack([c.age[s : s + n] for c, s in picks])
        target = torch.stack([c.mel[s * r : (s + n) * r] for c, s in picks])
        onset = torch.stack([c.onset[s * r : (s + n) * r] for c, s in picks])
        target[silent] = math.log(cfg.log_floor)
        onset[silent] = 0.0
        encoded = encoder.encode(frames, age)
        trunk = generator.trunk(encoded.features)
        x, onset_logit, offset_logit = generator.decode(trunk)
        # Teacher forcing: the ground-truth contact frames fire the events.
        mel, _ = generator.render(x, onset_logit, offset_logit, events=onset)
        w = opts.warmup_frames * r
        mel_loss = F.l1_loss(mel[:, w:], target[:, w:])
        onset_loss = onset_losses(onset_logit, offset_logit, onset, r)
        loss = mel_loss + opts.onset_weight * onset_loss
        level_loss = torch.zeros(())
        if opts.level_weight > 0:
            levels = torch.stack([_levels(c)[s * r : (s + n) * r] for c, s in picks])
            levels[silent] = float("nan")
            hit = ~torch.isnan(levels[..., 0])
            if hit.any():
                predicted = generator.event_level(x).clamp(max=8.0).transpose(1, 2)
                level_loss = F.l1_loss(predicted[hit], levels[hit])
                loss = loss + opts.level_weight * level_loss
        d_loss = torch.zeros(())
        if opts.decay_weight > 0:
            d_loss = decay_loss(generator, x, picks, silent, r, n, cfg.log_floor)
            loss = loss + opts.decay_weight * d_loss
        m_loss = torch.zeros(())
        if opts.motion_weight > 0:
            motion = motion_targets(_screens(picks, n), scale, (cfg.width, cfg.height))
            motion[silent] = 0.0  # no object in view
            m_loss = motion_loss(motion_head(trunk), motion)
            loss = loss + opts.motion_weight * m_loss
        k_loss = torch.zeros(())
        if opts.material_weight > 0:
            materials = torch.stack([_materials(c)[s : s + n] for c, s in picks])
            # Flipping keeps the colours; a distractor crop has no impact.
            materials[silent] = NO_IMPACT
            k_loss = material_loss(
                material_logits(material_head, trunk, encoded.materials), materials
            )
            loss = loss + opts.material_weight * k_loss
        p_loss = torch.zeros(())
        if opts.keypoint_weight > 0:
            positions = picture_positions(_screens(picks, n)[:, 1:-1], flip, scale, shift)
            positions[silent] = float("nan")  # a distractor crop has no object
            maps = encoded.keypoint_maps
            assert maps is not None
            p_loss = keypoint_loss(_keypoints(encoded.keypoints), maps, positions)
            loss = loss + opts.keypoint_weight * p_loss
        optimizer_step(optimizer, scheduler, loss)
        if step % 100 == 0 or step == opts.generator_steps - 1:
            log.info(
                "generator step %d mel %.4f onset %.4f motion %.4f level %.4f decay %.4f "
                "material %.4f keypoint %.4f (%.0f s)",
                step,
                mel_loss.item(),
                onset_loss.item(),
                m_loss.item(),
                level_loss.item(),
                d_loss.item(),
                k_loss.item(),
                p_loss.item(),
                time.perf_counter() - started,
            )
        if val and (step % 500 == 499 or step == opts.generator_steps - 1):
            seen = trunks(encoder.eval(), generator.eval(), val)
            score = onset_score(generator, onset_heads(generator, seen, val), cfg)
            log.info(
                "generator step %d validation onset F1 %.3f (P %.3f, R %.3f)",
                step,
                score.f1,
                score.precision,
                score.recall,
            )
            if opts.material_weight > 0:
                log.info(
                    "generator step %d validation material accuracy: object %.3f, other %.3f "
                    "(%d impacts)",
                    step,
                    *validation_materials(material_head, seen, val),
                )
            if opts.keypoint_weight > 0:
                log.info(
                    "generator step %d validation keypoint error: median %.2f model pixels",
                    step,
                    validation_keypoints([_keypoints(s.keypoints) for s in seen], val),
                )
            encoder.train()
            generator.train()
    return encoder.eval(), generator.eval()


Heads = list[tuple[torch.Tensor, torch.Tensor, np.ndarray]]


def onset_heads(generator: torch.nn.Module, seen: list[Seen], clips: list[TrainClip]) -> Heads:
    """Per clip: the onset and offset logits read from its trunk, and the contact frames."""
    heads = []
    with torch.no_grad():
        for s, clip in zip(seen, clips, strict=True):
            _, onset_logit, offset_logit = generator.decode(s.trunk)
            heads.append((onset_logit, offset_logit, np.flatnonzero(clip.onset.numpy())))
    return heads


def onset_score(
    generator: torch.nn.Module, heads: Heads, cfg: ModelConfig, trigger: float | None = None
) -> OnsetScore:
    """Events fired from `heads` against their contact onsets, matched within +-50 ms (the sync
    metric, without the vocoder and the detector)."""
    seconds = cfg.hop / cfg.sample_rate
    scores = []
    for onset_logit, offset_logit, truth in heads:
        fired = np.flatnonzero(generator.fire(onset_logit, offset_logit, trigger)[0].numpy())
        scores.append(match_onsets(fired * seconds, truth * seconds))
    return combined(scores)


TRIGGERS = tuple(np.round(np.arange(0.15, 0.8, 0.05), 2).tolist())


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
        runs = [generator.decode(s.trunk) for s in trunks(encoder, generator, clips)]
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


def train(
    data_dir: Path,
    out_dir: Path,
    cfg: ModelConfig,
    opts: TrainOptions,
    limit: int | None = None,
    vocoder_from: Path | None = None,
    init_from: Path | None = None,
    val_dir: Path | None = None,
) -> Path:
    """Train every stage and save a checkpoint. `vocoder_from` reuses a checkpoint's vocoder;
    `init_from` continues training its encoder and generator. The onset trigger is calibrated
    on the clips of `val_dir` (a tenth of the training clips without one)."""
    torch.manual_seed(opts.seed)
    clips = load_clips(
        data_dir,
        cfg,
        limit,
        seen_impacts=opts.seen_impacts,
        levels=opts.level_weight > 0 or opts.decay_weight > 0,
    )
    val = load_clips(val_dir, cfg, seen_impacts=opts.seen_impacts) if val_dir else None
    if vocoder_from is None:
        vocoder = train_vocoder(clips, cfg, opts)
    else:
        vocoder = load_stage(vocoder_from, "vocoder")
        # A distilled vocoder may differ in size.
        cfg = cfg.with_vocoder_of(checkpoint_config(vocoder_from))
    encoder, generator = train_generator(clips, cfg, opts, init_from, val)
    calibrate_trigger(encoder, generator, vocoder, val or clips[: max(1, len(clips) // 10)], cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = save_checkpoint(out_dir / "model.pt", cfg, encoder, generator, vocoder)
    log.info("saved %s", checkpoint)
    return checkpoint


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("data/train"))
    parser.add_argument("--out", type=Path, default=Path("runs/preview"))
    parser.add_argument("--vocoder-steps", type=int, default=TrainOptions.vocoder_steps)
    parser.add_argument("--generator-steps", type=int, default=TrainOptions.generator_steps)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N clips")
    parser.add_argument(
        "--vocoder-from",
        type=Path,
        default=None,
        help="reuse the vocoder of this checkpoint instead of training one",
    )
    parser.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="continue training this checkpoint's encoder and generator",
    )
    parser.add_argument("--lr", type=float, default=TrainOptions.lr)
    for name, meaning in (
        ("onset", "the onset heads' loss against the mel loss"),
        ("motion", "the dense motion targets (engines.train.motion); 0 = off"),
        ("level", "the impact events' level loss (with --seen-impacts); 0 = off"),
        ("decay", "the impact events' decay loss; 0 = off"),
        ("material", "the material targets at impact frames (engines.train.material); 0 = off"),
        ("keypoint", "the keypoints' targets (engines.train.keypoints); 0 = off"),
    ):
        parser.add_argument(
            f"--{name}-weight",
            type=float,
            default=getattr(TrainOptions, f"{name}_weight"),
            help=f"weight of {meaning}",
        )
    parser.add_argument(
        "--seen-impacts",
        action="store_true",
        help="onset targets on every impact of at least 0.02 N s, heard or not",
    )
    parser.add_argument(
        "--encoder-channels",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        default=None,
        help="the visual encoder's widths, comma-separated (patch embedding first); default: "
        "those of --init-from, else the reference model's",
    )
    parser.add_argument(
        "--encoder-glimpses",
        type=int,
        default=None,
        help="attention pools over the encoder's patch grid; default: those of --init-from, "
        "else the reference model's",
    )
    parser.add_argument(
        "--encoder-materials",
        action="store_true",
        help="the glimpses name the materials in each frame (needs glimpses); with "
        "--material-weight their own target trains them",
    )
    parser.add_argument(
        "--encoder-keypoints",
        type=int,
        default=None,
        help="soft arg-max keypoints over the encoder's patch grid (--keypoint-weight puts them "
        "on the objects); default: those of --init-from, else none",
    )
    parser.add_argument("--feature-dim", type=int, default=ModelConfig.feature_dim)
    parser.add_argument(
        "--lookahead",
        type=int,
        default=ModelConfig.generator_lookahead,
        help="video frames the generator sees past the one it renders",
    )
    parser.add_argument(
        "--distractors",
        type=float,
        default=TrainOptions.distractor_p,
        help="share of crops replaced by procedural scenes where nothing sounds",
    )
    parser.add_argument(
        "--val", type=Path, default=None, help="clips (not trained on) to calibrate and report on"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    opts = TrainOptions(
        vocoder_steps=args.vocoder_steps,
        generator_steps=args.generator_steps,
        lr=args.lr,
        onset_weight=args.onset_weight,
        motion_weight=args.motion_weight,
        seen_impacts=args.seen_impacts,
        level_weight=args.level_weight,
        decay_weight=args.decay_weight,
        material_weight=args.material_weight,
        keypoint_weight=args.keypoint_weight,
        distractor_p=args.distractors,
    )
    cfg = ModelConfig(feature_dim=args.feature_dim, generator_lookahead=args.lookahead)
    if args.init_from is not None:  # a pruned checkpoint (engines.export.prune) stays pruned
        start = checkpoint_config(args.init_from)
        cfg = dataclasses.replace(
            cfg,
            generator_expand=start.generator_expand,
            encoder_channels=start.encoder_channels,
            encoder_glimpses=start.encoder_glimpses,
            encoder_materials=start.encoder_materials,
            encoder_keypoints=start.encoder_keypoints,
        )
    if args.encoder_channels is not None:
        cfg = dataclasses.replace(cfg, encoder_channels=args.encoder_channels)
    if args.encoder_glimpses is not None:
        cfg = dataclasses.replace(cfg, encoder_glimpses=args.encoder_glimpses)
    if args.encoder_keypoints is not None:
        cfg = dataclasses.replace(cfg, encoder_keypoints=args.encoder_keypoints)
    if args.encoder_materials:
        cfg = dataclasses.replace(cfg, encoder_materials=len(MATERIAL_NAMES))
    train(
        args.data,
        args.out,
        cfg,
        opts,
        args.limit,
        args.vocoder_from,
        args.init_from,
        args.val,
    )


if __name__ == "__main__":
    main()
