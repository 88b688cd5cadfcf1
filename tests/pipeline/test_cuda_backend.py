"""The cuda backend's code on torch's CPU device (CI has no GPU): it loads every shipped tier,
its graphs take the contract's inputs, and a render through it is the cpu backend's render (fp32:
the same track to float rounding; fp16 and bf16: within a stated log-mel distance, with the same
contacts). Streams, pinned memory and CUDA graphs need a GPU: bench/gpu.py checks them there."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from engines.eval.sync import read_audio
from service.config import Settings
from service.errors import BackendUnavailable, DeviceOutOfMemory
from service.pipeline.backends.base import backend_present, create_backend
from service.pipeline.backends.cuda import CudaBackend
from service.pipeline.engine import FoleyEngine
from service.pipeline.loading import load_engine
from service.pipeline.types import RenderOptions
from tests.media import videos

pytestmark = pytest.mark.slow

# Reduced precision on the CPU device stands in for the GPU's: the same rounding of weights and
# activations. Log-mel distance in dB (mean absolute, over the 64 bands, where either is above
# -60 dB): fp32 rounding is far under 0.1 dB, the reduced precisions under LOG_MEL_DB.
LOG_MEL_DB = 1.5


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "square.mp4"
    return videos.encode_clip(path, fps=30, frames=60, size=(160, 120)).path


def render(engine: FoleyEngine, clip: Path, out: Path) -> tuple[np.ndarray, list[float]]:
    result = engine.render(clip, out, RenderOptions(format="wav", loudness_lufs=None))
    audio, _ = read_audio(out)
    return audio, [m.time_s for m in result.markers]


def log_mel_db(audio: np.ndarray, rate: int = 48000) -> np.ndarray:
    frames = np.lib.stride_tricks.sliding_window_view(audio, 1024)[::256] * np.hanning(1024)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    edges = np.geomspace(30, rate / 2, 65)
    bins = np.fft.rfftfreq(1024, 1 / rate)
    mel = np.stack(
        [power[:, (bins >= lo) & (bins < hi)].sum(axis=1) for lo, hi in itertools.pairwise(edges)],
        axis=1,
    )
    return 10 * np.log10(mel + 1e-10)


def distance_db(a: np.ndarray, b: np.ndarray) -> float:
    la, lb = log_mel_db(a), log_mel_db(b)
    heard = (la > -60) | (lb > -60)
    return float(np.abs(la - lb)[heard].mean()) if heard.any() else 0.0


@pytest.mark.parametrize("tier", ["preview", "export", "objects"])
def test_a_render_on_the_cuda_backend_is_the_cpu_backends(
    tier: str, clip: Path, tmp_path: Path
) -> None:
    settings = Settings(default_tier=tier, window_memo=False)
    reference = load_engine(settings)
    fp32 = CudaBackend(reference.tier, device="cpu", precision={})  # a stage not named: fp32
    on_torch = FoleyEngine(settings, reference.tier, fp32)
    assert fp32.info().precision == dict.fromkeys([s.name for s in reference.tier.stages], "fp32")
    expected, expected_at = render(reference, clip, tmp_path / "cpu.wav")
    got, got_at = render(on_torch, clip, tmp_path / "torch.wav")
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 4 / 32768  # 16-bit WAVs: rounding apart
    assert len(got_at) == len(expected_at) and np.allclose(got_at, expected_at, atol=1e-6)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_stays_within_the_stated_distance(
    precision: str, clip: Path, tmp_path: Path
) -> None:
    settings = Settings(default_tier="preview", window_memo=False)
    reference = load_engine(settings)
    stages = dict.fromkeys([s.name for s in reference.tier.stages], precision)
    backend = CudaBackend(reference.tier, device="cpu", precision=stages)
    on_torch = FoleyEngine(settings, reference.tier, backend)
    expected, expected_at = render(reference, clip, tmp_path / "cpu.wav")
    got, got_at = render(on_torch, clip, tmp_path / "reduced.wav")
    assert distance_db(got, expected) < LOG_MEL_DB
    assert np.allclose(got_at, expected_at, atol=0.005) and len(got_at) == len(expected_at)


def test_each_stage_runs_in_the_precision_its_tier_chose() -> None:
    for name in ("preview", "export", "objects"):
        tier = load_engine(Settings(default_tier=name)).tier
        backend = CudaBackend(tier, device="cpu")
        assert backend.info().precision == {
            s.name: tier.gpu_precision.get(s.name, "fp32") for s in tier.stages
        }
        dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        for stage, precision in backend.precision.items():
            assert backend.graphs[stage].dtype == dtypes[precision]


def test_fp32_distance_is_rounding() -> None:
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(48000)).astype(np.float32)
    assert distance_db(audio, audio + 1e-6) < 0.01
    assert distance_db(audio, 2 * audio) == pytest.approx(6.02, abs=0.05)  # the measure's scale


def test_a_gpu_backend_without_a_gpu_is_refused_by_name() -> None:
    tier = load_engine(Settings()).tier
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
    tier = load_engine(Settings()).tier
    backend = CudaBackend(tier, device="cpu")

    def full(inputs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(backend, "graphs", {**backend.graphs, "vocoder": full})
    with pytest.raises(DeviceOutOfMemory, match="ran out of memory in the vocoder stage"):
        backend.run("vocoder", {})
    assert DeviceOutOfMemory.http_status == 503
