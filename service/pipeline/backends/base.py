"""The Backend protocol: how the pipeline runs a model stage, whatever runs it underneath.

A backend is built once per tier and owns its runtime sessions. `run` is called with the stage's
contract inputs (see service.pipeline.contract) and returns its outputs by name. Implementations
state their own thread-safety in their docstring; the pipeline never branches on which one it has.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from service.pipeline.contract import TierConfig


class Backend(Protocol):
    name: str
    tier: TierConfig

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def create_backend(name: str, tier: TierConfig, *, threads: int = 0) -> Backend:
    """Build the named backend; a backend that cannot load is an error, never a fallback."""
    if name == "onnxruntime":
        from service.pipeline.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(tier, threads=threads)
    raise ValueError(f"unknown backend {name!r} (available: onnxruntime)")
