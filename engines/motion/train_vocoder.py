"""Train the `motion` tier's vocoder (engines.motion.vocoder): a teacher on the simulator's impact
sounds, a student distilled from it, and a table of how close each comes to the simulator.

    python -m engines.motion.train_vocoder data      # impacts of simulated scenes, cached
    python -m engines.motion.train_vocoder teacher   # runs/vocoder/teacher.pt
    python -m engines.motion.train_vocoder student   # runs/vocoder/student.pt (distilled)
    python -m engines.motion.train_vocoder student --from-truth --out runs/vocoder/plain.pt
    python -m engines.motion.train_vocoder evaluate [--models ...]
    python -m engines.motion.train_vocoder ship      # student.pt -> service/models/motion

Data: every impact of pybullet scenes (engines.sim.scene, physics only, no camera), each sound
rendered by the simulator's sound model (engines.audio.modal) at time zero and divided by
impulse ** IMPULSE_EXPONENT: the vocoder's target for a unit excitation. Conditioning is only
what the service knows of a contact (its material and impulse), not the object's size, shape or
the floor, so the vocoder learns each material's sound over the sizes the scenes hold.

Teacher: a wide MLP trained through the bank (multi-resolution STFT loss). Student: the small MLP
the tier ships, trained on the teacher's parameters and audio over the training contacts and as
many again with their impulses redrawn (a teacher labels any input). `--from-truth`: the student
trained on the simulator's sounds directly, the baseline that shows what distillation adds. Each
step caches its output; `teacher` and `student` resume from their checkpoints.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from engines.audio.modal import IMPULSE_EXPONENT, render_impact
from engines.eval.quality import spectral_distance
from engines.export.contacts import renderer_config
from engines.models.config import ModelConfig
from engines.motion.export import VOCODER
from engines.motion.features import MATERIALS
from engines.motion.vocoder import (
    VoiceNet,
    condition,
    load_voice,
    save_voice,
    synthesize,
    weights,
)
from engines.sim.scene import scene_from_seed
from engines.sim.simulate import simulate_unfilmed
from engines.train.data import log_mel
from engines.train.losses import multi_resolution_stft_loss
from engines.train.optim import one_cycle, optimizer_step
from service.pipeline.contacts.render import Event, ModalVoices
from service.pipeline.contacts.tier import renderer_spec

log = logging.getLogger(__name__)
SAMPLE_RATE = 48000
CLIP_S = 0.5  # each target's length: what the loss sees of a ring
SCENE_S = 4.0
DATA = Path("data/vocoder")
RUNS = Path("runs/vocoder")
SEEDS = {"train": range(0, 1500), "val": range(700000, 700150)}
Targets = Callable[[int], tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None]]
STEPS = {"teacher": 1500, "student": 800}
SIZES = {"teacher": {"hidden": 256, "layers": 3}, "student": {"hidden": 32, "layers": 2}}


def build_data(split: str) -> Path:
    """Every impact of the split's scenes: material, impulse, unit-excitation sound."""
    out = DATA / f"{split}.npz"
    if out.exists():
        return out
    n = round(CLIP_S * SAMPLE_RATE)
    materials, impulses, sounds = [], [], []
    for seed in SEEDS[split]:
        clip = simulate_unfilmed(scene_from_seed(seed), duration_s=SCENE_S)
        for i, impact in enumerate(clip.impacts):
            _, samples = render_impact(
                replace(impact, time_s=0.0),
                sample_rate=SAMPLE_RATE,
                seed=seed,
                rng=np.random.default_rng([seed, 3, i]),
            )
            sound = np.zeros(n, np.float32)
            sound[: min(n, len(samples))] = samples[:n] / impact.impulse_ns**IMPULSE_EXPONENT
            materials.append(MATERIALS.index(impact.material))
            impulses.append(impact.impulse_ns)
            sounds.append(sound)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        out,
        material=np.asarray(materials),
        impulse=np.asarray(impulses, np.float32),
        sound=np.stack(sounds).astype(np.float16),
    )
    log.info("%s: %d impacts of %d scenes", out, len(materials), len(SEEDS[split]))
    return out


def load(split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with np.load(build_data(split)) as z:
        return (
            torch.from_numpy(z["material"]),
            torch.from_numpy(z["impulse"]),
            torch.from_numpy(z["sound"].astype(np.float32)),
        )


def noise(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The contact bursts' white noise, the same for the same seed."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def train(
    net: VoiceNet, out: Path, *, steps: int, batch: int, lr: float, targets: Targets
) -> VoiceNet:
    """Train `net` against `targets(step) -> (condition, target audio, target params or None)`,
    checkpointed every 100 steps to `out` and resumed from it."""
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = one_cycle(optimizer, steps)
    step = 0
    if out.exists():
        saved = torch.load(out, weights_only=True)
        net.load_state_dict(saved["net"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        step = saved["step"]
    mel = log_mel(ModelConfig())
    started, logged = time.perf_counter(), step
    while step < steps:
        cond, target, params = targets(step)
        predicted = net(cond)
        audio = synthesize(predicted, noise(target.shape, step), SAMPLE_RATE)
        loss = multi_resolution_stft_loss(audio, target) + (mel(audio) - mel(target)).abs().mean()
        if params is not None:
            loss = loss + sum(
                (p.log() - q.log()).abs().mean() for p, q in zip(predicted, params, strict=True)
            )
        optimizer_step(optimizer, scheduler, loss)
        step += 1
        if step % 100 == 0 or step == steps:
            out.parent.mkdir(parents=True, exist_ok=True)
            torch.save(
                {
                    **weights(net),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "step": step,
                },
                out,
            )
            per_step = (time.perf_counter() - started) / (step - logged)
            log.info("step %d loss %.3f (%.2f s/step)", step, loss.item(), per_step)
            started, logged = time.perf_counter(), step
    return net


def from_truth(batch: int) -> Targets:
    material, impulse, sound = load("train")

    def targets(step: int) -> tuple[torch.Tensor, torch.Tensor, None]:
        pick = torch.randint(len(material), (batch,), generator=torch.Generator().manual_seed(step))
        return condition(material[pick], impulse[pick], len(MATERIALS)), sound[pick], None

    return targets


def from_teacher(teacher: VoiceNet, batch: int) -> Targets:
    material, impulse, _ = load("train")
    n = round(CLIP_S * SAMPLE_RATE)

    def targets(step: int) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        g = torch.Generator().manual_seed(step)
        pick = torch.randint(len(material), (batch,), generator=g)
        drawn = impulse[pick]
        # Half the batch with its impulses redrawn over the training range: the teacher labels
        # contacts the scenes never held.
        redraw = torch.rand(batch, generator=g) < 0.5
        spread = torch.exp(torch.empty(batch).uniform_(-1.5, 1.5, generator=g))
        drawn = torch.where(redraw, drawn * spread, drawn)
        cond = condition(material[pick], drawn, len(MATERIALS))
        with torch.no_grad():
            params = teacher(cond)
            audio = synthesize(params, noise((batch, n), -step - 1), SAMPLE_RATE)
        return cond, audio, params

    return targets


def evaluate(models: dict[str, VoiceNet], limit: int) -> str:
    """Per-impact log-mel and MR-STFT distance to the simulator's sound, on held-out scenes;
    the tier's hand-set voices (engines.export.contacts) for comparison."""
    material, impulse, sound = load("val")
    material, impulse, sound = material[:limit], impulse[:limit], sound[:limit]
    mel = log_mel(ModelConfig())
    # The voices themselves, as the vocoder's rows: no mix gain, no limiter.
    voices = ModalVoices(renderer_spec(renderer_config(SAMPLE_RATE)), SAMPLE_RATE)
    n = sound.shape[1]
    rendered: dict[str, list[np.ndarray]] = {"hand-set voices": []}
    for i, (m, p) in enumerate(zip(material.tolist(), impulse.tolist(), strict=True)):
        audio = np.zeros(n)
        ring = voices.voice(Event(0.0, p, m), 0.0, np.random.default_rng([0, i]))[:n]
        audio[: len(ring)] = ring / p**IMPULSE_EXPONENT
        rendered["hand-set voices"].append(audio)
    cond = condition(material, impulse, len(MATERIALS))
    for name, net in models.items():
        with torch.no_grad():
            audio = synthesize(net(cond), noise(sound.shape, 12345), SAMPLE_RATE)
        rendered[name] = list(audio.numpy())
    rows = [
        f"held-out impacts: {len(material)} of {len(SEEDS['val'])} scenes",
        "| voices | log-mel distance | MR-STFT distance |",
        "|---|---|---|",
    ]
    for name, audios in rendered.items():
        d = [spectral_distance(a, t.numpy(), mel) for a, t in zip(audios, sound, strict=True)]
        rows.append(
            f"| {name} | {np.mean([x.log_mel for x in d]):.3f} | "
            f"{np.mean([x.stft for x in d]):.3f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["data", "teacher", "student", "evaluate", "ship"])
    parser.add_argument("--steps", type=int, help="default: teacher 1500, student 800")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--from-truth", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--models", nargs="*", type=Path)
    parser.add_argument("--limit", type=int, default=400)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(0)
    if args.step == "data":
        for split in SEEDS:
            build_data(split)
    elif args.step in SIZES:
        if args.step == "teacher" or args.from_truth:
            targets = from_truth(args.batch)
        else:
            targets = from_teacher(load_voice(RUNS / "teacher.pt"), args.batch)
        train(
            VoiceNet(len(MATERIALS), **SIZES[args.step]),
            args.out or RUNS / f"{args.step}.pt",
            steps=args.steps or STEPS[args.step],
            batch=args.batch,
            lr=args.lr,
            targets=targets,
        )
    elif args.step == "ship":
        save_voice(load_voice(args.out or RUNS / "student.pt"), VOCODER)
        log.info("wrote %s; re-export the tier: python -m engines.motion.export --rule", VOCODER)
    elif args.step == "evaluate":
        paths = args.models or sorted(RUNS.glob("*.pt"))
        print(evaluate({p.stem: load_voice(p) for p in paths}, args.limit))


if __name__ == "__main__":
    main()
