"""An INT8 tier keeps the contract and stays close to its float tier."""

from __future__ import annotations

import numpy as np
import onnx

from engines.export.quantize import quantize_tier
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contract import TierConfig, load_frames_tier
from service.pipeline.preprocess import ModelFrames
from service.pipeline.streaming import synthesize_clip


def test_int8_tier_keeps_the_contract_and_the_sound(
    tiny_tier: TierConfig, tiny_backend: Backend, tmp_path
) -> None:
    target = quantize_tier(tiny_tier.path, tmp_path / "tiny-int8", clips=1)
    tier = load_frames_tier(target.parent, target.name)
    assert tier.name == "tiny-int8"
    for stage in ("encoder", "generator"):
        ops = {node.op_type for node in onnx.load(str(target / f"{stage}.onnx")).graph.node}
        assert "QuantizeLinear" in ops and "DequantizeLinear" in ops, stage
    backend = create_backend("cpu", tier, threads=1)  # checks the graphs' inputs
    rng = np.random.default_rng(0)
    n = 60
    clip = ModelFrames(
        0, rng.integers(0, 256, (n, tier.height, tier.width, 3), np.uint8), np.zeros(n, np.float32)
    )
    float_track = synthesize_clip(clip, tier=tiny_tier, backend=tiny_backend)
    int8_track = synthesize_clip(clip, tier=tier, backend=backend)
    assert int8_track.shape == float_track.shape
    error = np.sqrt(np.mean((int8_track - float_track) ** 2))
    assert error < 0.2 * np.sqrt(np.mean(float_track**2)) + 1e-6
