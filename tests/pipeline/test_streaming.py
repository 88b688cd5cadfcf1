"""Windowed synthesis equals a single pass over the whole clip: joins are exact."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from service.pipeline.backends.base import Backend
from service.pipeline.contract import TierConfig
from service.pipeline.offline import OfflineSynth, synthesize_clip
from service.pipeline.preprocess import ModelFrames


def _clip(tier: TierConfig, n: int, seed: int = 0) -> ModelFrames:
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (n, tier.height, tier.width, 3), dtype=np.uint8)
    return ModelFrames(0, rgb, rng.random(n).astype(np.float32))


def _windowed(
    tier: TierConfig,
    backend: Backend,
    clip: ModelFrames,
    pushes: list[int],
    window: int,
    num_samples: int,
) -> tuple[np.ndarray, int]:
    synth = OfflineSynth(tier, backend, window_frames=window)
    chunks, edges, most = [], [0, *np.cumsum(pushes)], 0
    for a, b in itertools.pairwise(edges):
        chunks += synth.push(ModelFrames(int(a), clip.rgb[a:b], clip.age[a:b]))
        most = max(most, len(synth._features))
    chunks += synth.finish(len(clip), num_samples)
    return np.concatenate(chunks), most


@pytest.mark.parametrize(
    ("pushes", "window"),
    [
        ([200], 50),
        ([1, 1, 1, 97, 100], 37),
        ([32] * 6 + [8], 64),
        ([200], 500),  # one window larger than the clip
    ],
)
def test_windowed_equals_single_pass(
    tiny_tier: TierConfig, tiny_backend: Backend, pushes: list[int], window: int
) -> None:
    clip = _clip(tiny_tier, sum(pushes))
    num_samples = len(clip) * tiny_tier.samples_per_frame - 123  # a partial last frame
    reference = synthesize_clip(clip, tier=tiny_tier, backend=tiny_backend, num_samples=num_samples)
    windowed, _ = _windowed(tiny_tier, tiny_backend, clip, pushes, window, num_samples)
    assert windowed.shape == (num_samples,)
    np.testing.assert_allclose(windowed, reference, atol=1e-5 * max(1e-3, np.abs(reference).max()))


def test_memory_is_bounded_by_the_window(tiny_tier: TierConfig, tiny_backend: Backend) -> None:
    window, push = 40, 16
    clip = _clip(tiny_tier, 600)
    _, most = _windowed(
        tiny_tier,
        tiny_backend,
        clip,
        [push] * 37 + [8],
        window,
        len(clip) * tiny_tier.samples_per_frame,
    )
    bound = window + tiny_tier.left_context_frames + tiny_tier.right_context_frames + push
    assert most <= bound


def test_frames_out_of_order_are_refused(tiny_tier: TierConfig, tiny_backend: Backend) -> None:
    clip = _clip(tiny_tier, 10)
    synth = OfflineSynth(tiny_tier, tiny_backend)
    with pytest.raises(ValueError, match="expected 0"):
        list(synth.push(ModelFrames(3, clip.rgb, clip.age)))
