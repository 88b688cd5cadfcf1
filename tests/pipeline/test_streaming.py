"""Streaming synthesis: any chunking of the frames gives the track one pass gives, which is the
track the trained model gives over the whole clip at once; audio follows frames one frame behind."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from service.pipeline.backends.base import Backend
from service.pipeline.backends.cuda import CudaBackend
from service.pipeline.contract import TierConfig
from service.pipeline.preprocess import ModelFrames, to_model_input
from service.pipeline.streaming import StreamRunner, synthesize_clip


def _clip(tier: TierConfig, n: int, seed: int = 0) -> ModelFrames:
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (n, tier.height, tier.width, 3), dtype=np.uint8)
    return ModelFrames(0, rgb, rng.random(n).astype(np.float32))


def _streamed(
    tier: TierConfig, backend: Backend, clip: ModelFrames, pushes: list[int], num_samples: int
) -> np.ndarray:
    runner = StreamRunner(tier, backend)
    stream = runner.open()
    chunks, edges = [], [0, *np.cumsum(pushes)]
    for a, b in itertools.pairwise(edges):
        chunks += runner.push([stream], [ModelFrames(int(a), clip.rgb[a:b], clip.age[a:b])])
    chunks += runner.finish([stream])
    return np.concatenate([c.audio for c in chunks])[:num_samples]


def _close(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, atol=1e-5 * max(1e-3, np.abs(b).max()))


@pytest.mark.parametrize("pushes", [[1] * 40, [1, 1, 1, 97, 100], [32] * 6 + [8], [2, 198]])
def test_any_chunking_equals_one_pass(
    tiny_tier: TierConfig, tiny_backend: Backend, pushes: list[int]
) -> None:
    clip = _clip(tiny_tier, sum(pushes))
    num_samples = len(clip) * tiny_tier.samples_per_frame - 123  # a partial last frame
    reference = synthesize_clip(clip, tier=tiny_tier, backend=tiny_backend, num_samples=num_samples)
    streamed = _streamed(tiny_tier, tiny_backend, clip, pushes, num_samples)
    assert streamed.shape == reference.shape == (num_samples,)
    _close(streamed, reference)


@pytest.mark.parametrize("pushes", [[1] * 40, [32] * 6 + [8]])
def test_on_the_cuda_backend_too_any_chunking_equals_one_pass(
    tiny_tier: TierConfig, tiny_backend: Backend, pushes: list[int]
) -> None:
    """The cuda backend's code (on torch's CPU device): the same stream contract, so chunked
    equals one pass, and both equal the cpu backend's track."""
    on_torch = CudaBackend(tiny_tier, device="cpu", precision={})
    clip = _clip(tiny_tier, sum(pushes), seed=2)
    num_samples = len(clip) * tiny_tier.samples_per_frame
    reference = synthesize_clip(clip, tier=tiny_tier, backend=on_torch, num_samples=num_samples)
    _close(_streamed(tiny_tier, on_torch, clip, pushes, num_samples), reference)
    _close(reference, synthesize_clip(clip, tier=tiny_tier, backend=tiny_backend))


@pytest.mark.parametrize("frames", [1, 2, 75])
def test_one_pass_equals_the_model_over_the_whole_clip(
    tiny_tier: TierConfig, tiny_backend: Backend, frames: int
) -> None:
    """The exported streaming graphs against the trained model's own whole-clip forward pass
    (zero padding, no state): the stream contract loses nothing at the start or the end."""
    import torch

    from engines.models.checkpoint import load_checkpoint

    clip = _clip(tiny_tier, frames, seed=1)
    _, encoder, generator, vocoder = load_checkpoint(tiny_tier.path.parent / "tiny.pt")
    with torch.no_grad():
        pixels = torch.from_numpy(to_model_input(clip.rgb))[None]
        mel, _ = generator(encoder(pixels, torch.from_numpy(clip.age)[None]))
        expected = vocoder(mel)[0].numpy()
    _close(synthesize_clip(clip, tier=tiny_tier, backend=tiny_backend), expected)


def test_audio_follows_the_frames_by_the_lookahead(
    tiny_tier: TierConfig, tiny_backend: Backend
) -> None:
    clip, spf = _clip(tiny_tier, 30), tiny_tier.samples_per_frame
    ahead = tiny_tier.generator.right_context
    assert ahead > 1  # the tiny model's, not the default one frame
    runner = StreamRunner(tiny_tier, tiny_backend)
    stream = runner.open()
    out = 0
    for k in range(len(clip)):
        frame = ModelFrames(k, clip.rgb[k : k + 1], clip.age[k : k + 1])
        out += sum(len(c.audio) for c in runner.push([stream], [frame]))
        # frame k - ahead is complete once frame k is in
        assert out == max(0, k + 1 - ahead) * spf
    out += sum(len(c.audio) for c in runner.finish([stream]))
    assert out == len(clip) * spf


def test_state_keeps_the_contract_shapes(tiny_tier: TierConfig, tiny_backend: Backend) -> None:
    """Memory does not grow with the clip: all a stream keeps is its fixed-size state."""
    clip = _clip(tiny_tier, 300)
    runner = StreamRunner(tiny_tier, tiny_backend)
    stream = runner.open()
    for k in range(0, 300, 25):
        runner.push([stream], [ModelFrames(k, clip.rgb[k : k + 25], clip.age[k : k + 25])])
    for stage in tiny_tier.stages:
        shapes = {name: list(v.shape) for name, v in stream.state[stage.name].items()}
        assert shapes == {n: [1 if d == "B" else d for d in s] for n, s in stage.state.items()}


def test_frames_out_of_order_are_refused(tiny_tier: TierConfig, tiny_backend: Backend) -> None:
    clip = _clip(tiny_tier, 10)
    runner = StreamRunner(tiny_tier, tiny_backend)
    with pytest.raises(ValueError, match="expected 0"):
        runner.push([runner.open()], [ModelFrames(3, clip.rgb, clip.age)])


def test_streams_run_together_as_they_run_alone(
    tiny_tier: TierConfig, tiny_backend: Backend
) -> None:
    """Micro-batching: streams stepped in one batch (joining at different times, with
    different chunk sizes) each get exactly the track they get alone."""
    clips = [_clip(tiny_tier, 24, seed=s) for s in (2, 3, 4)]
    joins = [0, 0, 5]  # the third stream starts five steps later
    runner = StreamRunner(tiny_tier, tiny_backend)
    streams = [runner.open() for _ in clips]
    audio: list[list[np.ndarray]] = [[] for _ in clips]
    events: list[list[np.ndarray]] = [[] for _ in clips]
    for step in range(30):
        batch = [i for i, j in enumerate(joins) if j <= step and streams[i].frames < 24]
        size = 1 if step % 3 else 2  # all streams of a step take the same number of frames
        frames = []
        for i in batch:
            k = streams[i].frames
            frames.append(ModelFrames(k, clips[i].rgb[k : k + size], clips[i].age[k : k + size]))
        for i, chunk in zip(batch, runner.push([streams[i] for i in batch], frames), strict=True):
            audio[i].append(chunk.audio)
            events[i].append(chunk.events)
    for i, chunk in enumerate(runner.finish(streams)):
        audio[i].append(chunk.audio)
        events[i].append(chunk.events)
    for i, clip in enumerate(clips):
        alone = runner.open()
        (whole,) = runner.push([alone], [clip])
        (tail,) = runner.finish([alone])
        _close(np.concatenate(audio[i]), np.concatenate([whole.audio, tail.audio]))
        assert np.array_equal(
            np.concatenate(events[i]), np.concatenate([whole.events, tail.events])
        )
