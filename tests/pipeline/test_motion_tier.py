"""A `motion` tier end to end: exported, loaded, streamed, and served by the engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from service.config import Settings
from service.pipeline.backends.onnxruntime import OnnxRuntimeBackend
from service.pipeline.motion.synth import MotionSynth
from service.pipeline.motion.tier import MotionTier, load_motion_tier
from service.pipeline.tier import load_tier
from tests.pipeline.test_motion import scene, texture


@pytest.fixture(scope="module")
def tier_dir(tmp_path_factory) -> Path:
    """A motion tier of an untrained head whose threshold every cell passes now and then, so
    that events fire (what they are does not matter here, only that every path gives the
    same ones)."""
    import torch

    from engines.motion.export import export
    from engines.motion.model import ContactHead

    torch.manual_seed(0)
    head = ContactHead(width=8)
    with torch.no_grad():
        head.out.bias[0] = -1.0
        head.out.weight[0] *= 200.0
    folder = tmp_path_factory.mktemp("models")
    export(head, folder / "motion", threshold=0.55, offset_s=-0.004, reference_strength=0.0)
    return folder


@pytest.fixture(scope="module")
def tier(tier_dir) -> MotionTier:
    return load_motion_tier(tier_dir, "motion")


def clip(n: int = 24, fps: float = 25.0) -> tuple[np.ndarray, np.ndarray]:
    background = texture(11)
    times = 3.0 + np.arange(n) / fps  # a stream need not start at zero
    frames = np.stack(
        [scene(background, 2 * k, 0, (60 + 9 * abs((k % 8) - 4), 90)) for k in range(n)]
    )
    return times, frames


def render(tier: MotionTier, pieces: list[slice]) -> tuple[np.ndarray, list]:
    times, frames = clip()
    synth = MotionSynth(tier, OnnxRuntimeBackend(tier, threads=1))
    audio = []
    for piece in pieces:
        audio += list(synth.push(times[piece], frames[piece]))
    audio += list(synth.finish(len(times) / 25.0))
    return np.concatenate(audio), list(synth.markers)


def test_the_exported_tier_loads_with_its_contract(tier_dir, tier):
    assert isinstance(load_tier(tier_dir, "motion"), MotionTier)
    assert (tier.width, tier.height, tier.sample_rate) == (320, 180, 48000)
    assert tier.head.inputs["windows"] == ["B", 28, 45, 80]
    assert tier.settings.offset_s == pytest.approx(-0.004)
    raw = json.loads((tier_dir / "motion" / "config.json").read_text())
    assert raw["kind"] == "motion"


def test_the_shipped_motion_tier_is_the_default_and_its_head_matches_its_config():
    settings = Settings()
    tier = load_motion_tier(settings.models_dir, settings.default_tier)
    session = ort.InferenceSession(str(tier.path / tier.head.file))
    inputs = {i.name: i.shape for i in session.get_inputs()}
    outputs = {o.name: o.shape for o in session.get_outputs()}
    assert set(inputs) == set(tier.head.inputs) and set(outputs) == set(tier.head.outputs)
    for name, shape in (tier.head.inputs | tier.head.outputs).items():
        got = inputs.get(name) or outputs[name]  # the graph's own: a dimension may be symbolic
        assert len(got) == len(shape)
        assert all(g == d for g, d in zip(got, shape, strict=True) if isinstance(g, int))
    assert tier.materials and 0.0 < tier.settings.threshold < 1.0


def test_a_tier_whose_default_voice_is_missing_is_refused(tier_dir, tmp_path):
    folder = tmp_path / "motion"
    folder.mkdir()
    raw = json.loads((tier_dir / "motion" / "config.json").read_text())
    raw["stages"]["head"]["config"]["default_material"] = "cardboard"
    (folder / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="cardboard"):
        load_motion_tier(tmp_path, "motion")


def test_streaming_in_any_pieces_equals_one_pass(tier):
    whole, markers = render(tier, [slice(None)])
    assert len(markers) > 0, "the test head must fire for this test to mean anything"
    assert len(whole) == round(24 / 25.0 * 48000)
    for pieces in (
        [slice(k, k + 1) for k in range(24)],
        [slice(0, 7), slice(7, 8), slice(8, None)],
    ):
        audio, got = render(tier, pieces)
        np.testing.assert_array_equal(audio, whole)
        assert got == markers


def test_events_carry_time_strength_and_an_optional_material(tier):
    _, markers = render(tier, [slice(None)])
    for m in markers:
        assert 0.0 <= m.time_s < 24 / 25.0
        assert m.kind == "impact" and m.strength is not None and m.strength > 0
        assert m.material is None or m.material in tier.materials


def test_the_engine_renders_a_file_with_a_motion_tier(tier_dir, tmp_path):
    from fractions import Fraction

    from engines.data.clips import encode_frames
    from service.pipeline.engine import FoleyEngine
    from service.pipeline.types import RenderOptions

    _, frames = clip()
    video = tmp_path / "clip.mp4"
    encode_frames(video, frames, Fraction(25))
    engine = FoleyEngine.load(Settings(models_dir=tier_dir, default_tier="motion"))
    result = engine.render(video, tmp_path / "out.wav", RenderOptions(format="wav"))
    assert result.tier == "motion"
    assert result.duration_s == pytest.approx(24 / 25.0, abs=0.05)
    assert (tmp_path / "out.wav").stat().st_size > 0
