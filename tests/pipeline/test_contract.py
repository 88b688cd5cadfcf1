"""The tier config states the graphs' real contract, for the shipped tiers and a fresh export."""

from __future__ import annotations

import shutil

import numpy as np
import onnxruntime as ort
import pytest

from service.config import Settings
from service.pipeline.backends.base import Backend
from service.pipeline.contract import TierConfig, load_frames_tier
from service.pipeline.streaming import initial_state
from service.pipeline.tier import load_tier
from tests.pipeline.conftest import SHIPPED

ALL_TIERS = sorted(p.name for p in SHIPPED.iterdir() if (p / "config.json").is_file())
SHIPPED_TIERS = [  # the frame-rate tiers: contacts and motion tiers state their own contracts
    name for name in ALL_TIERS if load_tier(SHIPPED, name).kind == "frames"
]


def test_a_preview_tier_ships() -> None:
    assert "preview" in SHIPPED_TIERS


@pytest.mark.parametrize("name", SHIPPED_TIERS)
def test_shipped_graphs_match_their_config(name: str) -> None:
    tier = load_frames_tier(SHIPPED, name)
    assert tier.mels_per_frame * tier.hop * tier.fps == tier.sample_rate
    for stage in tier.stages:
        session = ort.InferenceSession(str(tier.path / stage.file))
        inputs = {i.name: i.shape for i in session.get_inputs()}
        outputs = {o.name: o.shape for o in session.get_outputs()}
        assert set(inputs) == stage.graph_inputs
        assert set(outputs) == set(stage.outputs) | {f"next_{n}" for n in stage.state}
        shapes = stage.inputs | {f"state_{n}": shape for n, shape in stage.state.items()}
        for name_, shape in shapes.items():
            fixed = [d for d in shape if isinstance(d, int)]
            assert [d for d in inputs[name_] if isinstance(d, int)] == fixed


def test_shipped_artifacts_fit_the_budget() -> None:
    total = sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file())
    assert total <= 50 * 1024**2


def _whole(backend: Backend, tier: TierConfig, stage: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """One stage over a whole input in one call, as the stream contract says: zero state, and
    for a stage that looks ahead its first frames in its history and zeros after the end."""
    spec = next(s for s in tier.stages if s.name == stage)
    state = initial_state(spec)
    name = next(iter(spec.inputs))
    ahead = spec.right_context
    if ahead:
        state["history"][:, -ahead:] = x[:, :ahead]
        x = np.concatenate([x[:, ahead:], np.zeros_like(x[:, :ahead])], axis=1)
    out = backend.run(stage, {name: x} | {f"state_{k}": v for k, v in state.items()})
    return {k: v for k, v in out.items() if not k.startswith("next_")}


@pytest.mark.parametrize("frames", [1, 2, 7, 31])
def test_stage_shapes_and_rates(tiny_tier: TierConfig, tiny_backend: Backend, frames: int) -> None:
    t = tiny_tier
    rgb = np.random.default_rng(0).random((1, frames, 3, t.height, t.width), np.float32)
    state = {f"state_{k}": v for k, v in initial_state(t.encoder).items()}
    inputs = {"frames": rgb, "age": np.zeros((1, frames), np.float32)} | state
    feats = tiny_backend.run("encoder", inputs)
    assert feats["features"].shape == (1, frames, t.feature_dim)
    gen = _whole(tiny_backend, t, "generator", feats["features"])
    m = frames * t.mels_per_frame
    assert gen["mel"].shape == (1, m, t.mel.n_mels)
    assert gen["onset"].shape == (1, m)
    assert ((gen["onset"] >= 0) & (gen["onset"] <= 1)).all()
    audio = _whole(tiny_backend, t, "vocoder", gen["mel"])["audio"]
    assert audio.shape == (1, frames * t.samples_per_frame)
    assert audio.dtype == np.float32


def test_stages_respect_their_declared_context(
    tiny_tier: TierConfig, tiny_backend: Backend
) -> None:
    """Changing an input beyond a stage's declared context never changes an output."""
    t, rng = tiny_tier, np.random.default_rng(1)
    n = 40
    feats = rng.standard_normal((1, n, t.feature_dim)).astype(np.float32)
    base = _whole(tiny_backend, t, "generator", feats)["mel"]
    k = 20  # perturb frame k: outputs before k - right_context and after k + left must not move
    changed = feats.copy()
    changed[0, k] += 1.0
    moved = np.abs(_whole(tiny_backend, t, "generator", changed)["mel"] - base).max(-1)[0]
    r = t.mels_per_frame
    touched = np.flatnonzero(moved > 1e-6) // r
    assert touched.min() >= k - t.generator.right_context
    assert touched.max() <= k + t.generator.left_context
    mel = rng.standard_normal((1, n * r, t.mel.n_mels)).astype(np.float32)
    base_audio = _whole(tiny_backend, t, "vocoder", mel)["audio"]
    mel[0, 80] += 1.0
    moved_audio = np.abs(_whole(tiny_backend, t, "vocoder", mel)["audio"] - base_audio)[0]
    touched_frames = np.flatnonzero(moved_audio > 1e-6) // t.hop
    assert touched_frames.min() >= 80 - t.vocoder.right_context
    assert touched_frames.max() <= 80 + t.vocoder.left_context


def test_the_digest_follows_the_weights_not_the_version(tmp_path):
    shipped = Settings().models_dir / "preview"
    copy = tmp_path / "preview"
    shutil.copytree(shipped, copy)
    same = load_frames_tier(tmp_path, "preview")
    assert same.digest == load_frames_tier(shipped.parent, "preview").digest
    graph = copy / same.vocoder.file
    data = bytearray(graph.read_bytes())
    data[-1] ^= 1  # retrained weights, the version unchanged
    graph.write_bytes(bytes(data))
    retrained = load_frames_tier(tmp_path, "preview")
    assert retrained.version == same.version and retrained.digest != same.digest
