"""Vocoder distillation: the teacher's contract, the adversary's losses on known answers, and a
short teacher -> student run that ends in a tier the service serves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from engines.export.onnx_export import export_tier
from engines.models.checkpoint import load_checkpoint, save_checkpoint
from engines.models.discriminator import (
    MultiResolutionDiscriminator,
    discriminator_loss,
    generator_losses,
)
from engines.models.teacher import TeacherConfig, TeacherVocoder, load_teacher
from engines.train import vocoder as distill
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions
from tests.conftest import tiny_model
from tests.media import videos

TINY_TEACHER = TeacherConfig(
    n_mels=tiny_model().n_mels, hop=tiny_model().hop, dim=16, hidden=32, blocks=2
)


def test_teacher_maps_mel_frames_to_hops_and_sees_both_sides() -> None:
    torch.manual_seed(0)
    teacher = TeacherVocoder(TINY_TEACHER).eval()
    mel = torch.randn(2, 40, tiny_model().n_mels)
    with torch.no_grad():
        audio = teacher(mel)
        changed = mel.clone()
        changed[:, 20] += 3.0
        moved = teacher(changed)
    assert audio.shape == (2, 40 * tiny_model().hop)
    differs = (moved - audio).abs().amax(dim=0) > 1e-6
    hop = tiny_model().hop
    assert differs[: 19 * hop].any()  # not causal: frame 20 reaches back
    assert not differs[: 10 * hop].any()  # but only as far as its receptive field
    assert not differs[30 * hop :].any()


def test_adversary_losses_on_known_answers() -> None:
    ones, zeros = torch.ones(2, 1, 3, 4), torch.zeros(2, 1, 3, 4)
    feats = [torch.randn(2, 4, 3, 4)]
    perfect_judge = discriminator_loss([(ones, feats)], [(zeros, feats)])
    assert float(perfect_judge) == 0.0
    assert float(discriminator_loss([(zeros, feats)], [(ones, feats)])) == 2.0
    fooled, matching = generator_losses([(ones, feats)], [(ones, feats)])
    assert float(fooled) == 0.0 and float(matching) == 0.0
    caught, _ = generator_losses([(ones, feats)], [(zeros, [f + 1.0 for f in feats])])
    assert float(caught) == 1.0


def test_discriminator_judges_every_resolution() -> None:
    judged = MultiResolutionDiscriminator()(torch.randn(2, 9600))
    assert len(judged) == 3
    for logits, features in judged:
        assert logits.shape[:2] == (2, 1) and len(features) == 5


def write_sounds(folder: Path, n: int, seconds: float = 1.0) -> None:
    """Clips of decaying tone bursts: only the sound, which is all the vocoders read."""
    folder.mkdir()
    rate = tiny_model().sample_rate
    rng = np.random.default_rng(0)
    t = np.arange(int(seconds * rate)) / rate
    for i in range(n):
        audio = np.zeros_like(t)
        for start in rng.uniform(0, seconds - 0.2, 3):
            after = np.clip(t - start, 0, None)
            audio += (
                (t >= start)
                * np.sin(2 * np.pi * rng.uniform(300, 3000) * after)
                * np.exp(-after / 0.05)
            )
        audio = (0.2 * audio).astype(np.float32)
        np.savez(folder / f"clip_{i:05d}.npz", sample_rate=rate, audio=audio)


def test_fit_brings_a_student_closer_to_its_target() -> None:
    torch.manual_seed(0)
    cfg = tiny_model()
    rate = cfg.sample_rate
    t = torch.arange(rate) / rate
    audio = (0.2 * torch.sin(2 * torch.pi * 440 * t) * torch.exp(-t / 0.3)).float()
    sounds = [distill.Sound(audio, distill.log_mel(cfg)(audio[None])[0])]
    recipe = distill.Recipe(steps=40, batch=4, crop_mels=24, lr=3e-3, adversarial_from=40)
    mel = distill.log_mel(cfg)

    def loss(student: torch.nn.Module) -> float:
        with torch.no_grad():
            return float(distill.spectral_loss(student(sounds[0].mel[None]), audio[None], mel, 0.5))

    _, _, student = cfg.build()
    before = loss(student)
    distill.fit(student, sounds, [audio], cfg, recipe, "test")
    assert loss(student) < 0.7 * before


def test_teacher_then_student_into_a_served_tier(tmp_path: Path) -> None:
    write_sounds(tmp_path / "data", 3)
    teacher = tmp_path / "teacher.pt"
    common = ["--data", str(tmp_path / "data"), "--steps", "3", "--dim", "16", "--hidden", "32"]
    distill.main(["teacher", *common, "--blocks", "1", "--out", str(teacher)])
    assert load_teacher(teacher).cfg.dim == 16

    cfg = dataclasses.replace(tiny_model(), name="distilled")
    base = save_checkpoint(tmp_path / "base.pt", cfg, *cfg.build())
    student = tmp_path / "student.pt"
    distill.main(
        [
            "student",
            *common,
            "--blocks",
            "2",
            "--adversarial-from",
            "1",  # the adversary runs too
            "--teacher",
            str(teacher),
            "--into",
            str(base),
            "--out",
            str(student),
        ]
    )
    saved, encoder, _, vocoder = load_checkpoint(student)
    assert (saved.vocoder_dim, saved.vocoder_hidden, saved.vocoder_blocks) == (16, 32, 2)
    assert len(vocoder.blocks) == 2
    base_encoder = load_checkpoint(base)[1]
    for a, b in zip(encoder.state_dict().values(), base_encoder.state_dict().values(), strict=True):
        assert torch.equal(a, b)  # only the vocoder is replaced

    # The trained student moves into another checkpoint whole.
    other = save_checkpoint(tmp_path / "other.pt", cfg, *cfg.build())
    moved = tmp_path / "moved.pt"
    distill.main(
        ["swap", "--vocoder-from", str(student), "--into", str(other), "--out", str(moved)]
    )
    assert load_checkpoint(moved)[0].vocoder_blocks == 2
    for a, b in zip(
        load_checkpoint(moved)[3].state_dict().values(), vocoder.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)

    export_tier(student, tmp_path / "models" / "distilled")
    engine = FoleyEngine.load(Settings(models_dir=tmp_path / "models", default_tier="distilled"))
    clip = videos.encode_clip(tmp_path / "in.mp4", fps=25, frames=30, size=(96, 64))
    result = engine.render(clip.path, tmp_path / "out.wav", RenderOptions(format="wav"))
    assert result.tier == "distilled"
