"""The cuda backend's code on torch's CPU device (CI has no GPU): it loads every shipped tier,
its graphs take the contract's inputs, and a render through it is the cpu backend's render (fp32:
the same track to float rounding; each tier's chosen precisions: within the tolerance
docs/gpu.md states). Streams, pinned memory and CUDA graphs need a GPU: bench/gpu.py checks
them there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.config import SHIPPED_MODELS_DIR, Settings
from service.errors import BackendUnavailable, DeviceOutOfMemory
from service.pipeline.backends.base import backend_present, create_backend
from service.pipeline.backends.cuda import CudaBackend
from service.pipeline.engine import FoleyEngine
from service.pipeline.loading import load_engine
from service.pipeline.tier import load_tier
from service.pipeline.types import RenderOptions
from tests.media import videos

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "square.mp4"
    return videos.encode_clip(path, fps=30, frames=60, size=(160, 120)).path


def render(engine: FoleyEngine, clip: Path, out: Path) -> tuple[np.ndarray, list[float]]:
    from engines.eval.sync import read_audio

    result = engine.render(clip, out, RenderOptions(format="wav", loudness=None))
    audio, _ = read_audio(out)
    return audio, [m.time_s for m in result.markers]


@pytest.mark.parametrize("tier", ["motion", "preview", "export", "objects"])
def test_a_render_on_the_cuda_backend_is_the_cpu_backends(
    tier: str, clip: Path, tmp_path: Path
) -> None:
    settings = Settings(window_memo=False)
    reference = load_engine(settings, tier)
    fp32 = CudaBackend(reference.tier, device="cpu", precision={})  # a stage not named: fp32
    on_torch = FoleyEngine(settings, reference.tier, fp32)
    assert fp32.info().precision == dict.fromkeys([s.name for s in reference.tier.stages], "fp32")
    expected, expected_at = render(reference, clip, tmp_path / "cpu.wav")
    got, got_at = render(on_torch, clip, tmp_path / "torch.wav")
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 4 / 32768  # 16-bit WAVs: rounding apart
    assert len(got_at) == len(expected_at) and np.allclose(got_at, expected_at, atol=1e-6)


@pytest.mark.parametrize("tier", ["preview", "export", "objects"])
def test_the_precision_each_tier_chose_keeps_its_track(
    tier: str, clip: Path, tmp_path: Path
) -> None:
    """The tolerance docs/gpu.md states, with the instrument that chose the precisions: the
    log-mel distance (engines.eval.quality) and the onsets (engines.eval.onsets, 2 ms). Reduced
    precision on the CPU device stands in for the GPU's: the same rounding of the formats."""
    from engines.eval import precision
    from engines.models.mel import LogMel

    settings = Settings(window_memo=False)
    reference = load_engine(settings, tier)
    assert set(reference.tier.gpu_precision.values()) & {"fp16", "bf16"}  # something to check
    on_torch = FoleyEngine(settings, reference.tier, CudaBackend(reference.tier, device="cpu"))
    expected, _ = render(reference, clip, tmp_path / "cpu.wav")
    got, _ = render(on_torch, clip, tmp_path / "reduced.wav")
    mel = LogMel(sample_rate=48000, hop=400, n_fft=1600, n_mels=64, fmin=0.0, fmax=24000.0,
                 log_floor=1e-5)  # fmt: skip
    distance, f1 = precision.compare(got, expected, mel)
    assert distance <= precision.MAX_LOG_MEL and f1 >= precision.MIN_ONSET_F1


# The choices docs/gpu.md's table records; a stage its tier names no precision for is fp32.
CHOSEN = {
    "motion": {"head": "fp32", "vocoder": "fp32"},
    "preview": {"encoder": "fp16", "generator": "fp32", "vocoder": "fp16"},
    "export": {"encoder": "fp16", "generator": "fp16", "vocoder": "fp16"},
    "objects": {"localiser": "fp32", "head": "fp16"},
}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # torch's names


@pytest.mark.parametrize("name", CHOSEN)
def test_each_stage_runs_in_the_precision_its_tier_chose(name: str) -> None:
    import torch

    backend = CudaBackend(load_tier(SHIPPED_MODELS_DIR, name), device="cpu")
    assert backend.info().precision == CHOSEN[name]
    assert {stage: graph.dtype for stage, graph in backend.graphs.items()} == {
        stage: getattr(torch, DTYPES[chosen]) for stage, chosen in CHOSEN[name].items()
    }


def test_a_precision_given_replaces_the_tiers_and_a_stage_not_named_is_fp32() -> None:
    import torch

    tier = load_tier(SHIPPED_MODELS_DIR, "export")
    backend = CudaBackend(tier, device="cpu", precision={"generator": "bf16"})
    assert backend.info().precision == {"encoder": "fp32", "generator": "bf16", "vocoder": "fp32"}
    assert backend.graphs["generator"].dtype == torch.bfloat16
    assert backend.graphs["vocoder"].dtype == torch.float32
    with pytest.raises(ValueError, match="precision 'fp8' for encoder"):
        CudaBackend(tier, device="cpu", precision={"encoder": "fp8"})


def test_a_gpu_backend_without_a_gpu_is_refused_by_name() -> None:
    import torch

    tier = load_tier(SHIPPED_MODELS_DIR, Settings().default_tier)
    if backend_present("cuda"):
        assert create_backend("cuda", tier).info().name == "cuda"
        return
    with pytest.raises(BackendUnavailable, match="cuda backend cannot start here"):
        create_backend("cuda", tier)
    with pytest.raises(BackendUnavailable, match="tensorrt backend cannot start here"):
        create_backend("tensorrt", tier)
    assert create_backend("auto", tier).info().name == "cpu"
    assert torch.cuda.is_available() is False


def test_running_out_of_device_memory_fails_the_call_with_a_clear_error(monkeypatch) -> None:
    import torch

    tier = load_tier(SHIPPED_MODELS_DIR, Settings().default_tier)
    backend = CudaBackend(tier, device="cpu")
    stage = tier.stages[-1].name

    def full(inputs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(backend, "graphs", {**backend.graphs, stage: full})
    with pytest.raises(DeviceOutOfMemory, match=f"ran out of memory in the {stage} stage"):
        backend.run(stage, {})
    assert DeviceOutOfMemory.http_status == 503
