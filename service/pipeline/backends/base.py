"""The Backend protocol: how the pipeline runs a model stage, whatever runs it underneath.

A backend is built once per tier and owns its runtime sessions. `run` is called with the stage's
contract inputs (see service.pipeline.contract) and returns its outputs by name. Implementations
state their own thread-safety in their docstring; the pipeline never branches on which one it has.

    cpu        ONNX Runtime on the CPU (service.pipeline.backends.onnxruntime): the default
    cuda       PyTorch on a CUDA GPU (service.pipeline.backends.cuda)
    tensorrt   TensorRT engines built from the tier's graphs (service.pipeline.backends.tensorrt)
    auto       the fastest of these present: tensorrt, then cuda, then cpu

A backend asked for by name that cannot start is `BackendUnavailable`, never a fallback.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from service.errors import BackendUnavailable
from service.pipeline.contract import StagedTier

BackendName = Literal["cpu", "cuda", "tensorrt", "auto"]
FASTEST_FIRST = ("tensorrt", "cuda", "cpu")


@dataclass(frozen=True)
class BackendInfo:
    name: str  # cpu, cuda, tensorrt
    device: str  # what runs it: the CPU, or the GPU's name
    precision: dict[str, str] = field(default_factory=dict)  # stage -> fp32, fp16, bf16
    memory_bytes: int | None = None  # device memory held now (GPU backends)


class Backend(Protocol):
    name: str
    tier: StagedTier

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def info(self) -> BackendInfo: ...


def create_backend(
    name: str, tier: StagedTier, *, threads: int = 0, engine_cache_dir: Path | None = None
) -> Backend:
    """Build the named backend (`auto`: the fastest present). `threads`: the cpu backend's;
    `engine_cache_dir`: where the tensorrt backend keeps its engines."""
    if name == "auto":
        name = next(n for n in FASTEST_FIRST if n == "cpu" or backend_present(n))
    if name == "cpu":
        from service.pipeline.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(tier, threads=threads)
    if name == "cuda":
        from service.pipeline.backends.cuda import CudaBackend

        return CudaBackend(tier)
    if name == "tensorrt":
        from service.pipeline.backends.tensorrt import TensorRTBackend

        return TensorRTBackend(tier, cache_dir=engine_cache_dir)
    raise ValueError(f"unknown backend {name!r} (one of cpu, cuda, tensorrt, auto)")


def backend_present(name: str) -> bool:
    """Could `name` start here? (cpu: always; cuda: torch with a CUDA device; tensorrt: that
    and the tensorrt package.) Imports torch only when asked about a GPU backend."""
    if name == "cpu":
        return True
    if importlib.util.find_spec("torch") is None:
        return False
    if name == "tensorrt" and importlib.util.find_spec("tensorrt") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def require(name: str, present: bool, why: str) -> None:
    if not present:
        raise BackendUnavailable(f"the {name} backend cannot start here: {why}")
