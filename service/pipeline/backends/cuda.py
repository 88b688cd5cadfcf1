"""The `cuda` backend: the tier's ONNX graphs on a CUDA GPU through PyTorch.

    - each stage in its own precision: the tier config's `gpu_precision` ({stage: fp16 | bf16 |
      fp32}), chosen by measuring each stage's effect on the rendered track (docs/gpu.md); a stage
      not named there runs in fp32;
    - each stage on its own CUDA stream, so that two renders (or a render and the live worker)
      in different stages run at once; a call waits only for its own stream's event;
    - inputs and outputs pass through pinned host buffers (asynchronous copies);
    - a call whose shapes were seen before (the live preview's per-frame batches) is captured as
      a CUDA graph and replayed: one launch per stage instead of one per operator. At most
      `max_graphs` per stage are kept; a graph that cannot be captured runs eagerly;
    - device memory is capped (`memory_fraction` of the GPU); running out fails the call with
      `DeviceOutOfMemory`, and the next call starts from a freed cache.

`device="cpu"` runs the same graphs and precisions on torch's CPU device, without streams,
pinned memory or graphs: how CI, which has no GPU, tests this backend's loading, shapes and
numerics. torch is imported only when this backend is chosen.

Thread-safe: one lock per stage (a stage's graphs, buffers and stream are one caller's at a time).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from service.errors import DeviceOutOfMemory
from service.pipeline.backends.base import BackendInfo, backend_present, require
from service.pipeline.contract import StagedTier

try:
    import torch
except ImportError:  # pragma: no cover - the backend says so at start-up
    torch = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
PRECISIONS = ("fp32", "fp16", "bf16")
GRAPH_AFTER_CALLS = 2  # a shape seen this often is the live path's: worth a graph
MAX_GRAPHS = 32
# A call's shape: the stage, then (name, shape, dtype) of each input, sorted by name.
_ShapeKey = tuple[object, ...]


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    inputs: dict[str, torch.Tensor]  # on the device, filled before each replay
    outputs: dict[str, torch.Tensor]  # on the device, written by each replay
    host: dict[str, torch.Tensor]  # pinned, the outputs copied back
    keep: list[torch.Tensor]  # pinned host values the graph copies from at each replay


class CudaBackend:
    name = "cuda"

    def __init__(
        self,
        tier: StagedTier,
        *,
        device: str = "cuda",
        precision: dict[str, str] | None = None,
        graphs: bool = True,
        max_graphs: int = MAX_GRAPHS,
        memory_fraction: float = 0.9,
    ) -> None:
        require("cuda", torch is not None, "PyTorch is not installed (pip install foley[gpu])")
        if device == "cuda":
            require("cuda", backend_present("cuda"), "torch finds no CUDA device")
        from service.pipeline.backends.onnx_torch import OnnxGraph

        self.tier = tier
        self.device = torch.device(device)
        self.on_gpu = self.device.type == "cuda"
        chosen = precision if precision is not None else getattr(tier, "gpu_precision", {})
        self.precision = {s.name: chosen.get(s.name, "fp32") for s in tier.stages}
        for stage, p in self.precision.items():
            if p not in PRECISIONS:
                raise ValueError(f"{tier.name}: precision {p!r} for {stage} (one of {PRECISIONS})")
        if self.on_gpu:
            torch.cuda.set_per_process_memory_fraction(memory_fraction, self.device)
        dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        self.graphs = {
            s.name: OnnxGraph(tier.path / s.file, self.device, dtypes[self.precision[s.name]])
            for s in tier.stages
        }
        for s in tier.stages:
            if set(self.graphs[s.name].inputs) != s.graph_inputs:
                got = sorted(self.graphs[s.name].inputs)
                raise ValueError(f"{s.file}: inputs {got} != contract {sorted(s.graph_inputs)}")
        self.capture = graphs and self.on_gpu
        self.max_graphs = max_graphs
        self._locks = {s.name: threading.Lock() for s in tier.stages}
        self._streams = (
            {s.name: torch.cuda.Stream(self.device) for s in tier.stages} if (self.on_gpu) else {}
        )
        self._seen: Counter[_ShapeKey] = Counter()
        self._captured: dict[_ShapeKey, _Captured | None] = {}  # None: capture failed, run eagerly

    def info(self) -> BackendInfo:
        if self.on_gpu:
            device = torch.cuda.get_device_name(self.device)
            memory = int(torch.cuda.memory_reserved(self.device))
        else:
            device, memory = "CPU (torch)", None
        return BackendInfo("cuda", device, dict(self.precision), memory)

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with (
            self._locks[stage],
            self._on_stream(stage),
            torch.inference_mode(),
            device_memory_errors(stage),
        ):
            return self._run(stage, inputs)

    @contextlib.contextmanager
    def _on_stream(self, stage: str) -> Iterator[None]:
        if not self.on_gpu:
            yield
            return
        with torch.cuda.stream(self._streams[stage]):
            yield

    def _run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        key = (stage, *sorted((k, v.shape, v.dtype.str) for k, v in inputs.items()))
        if self.capture:
            self._seen[key] += 1
            captured = self._captured.get(key)
            if key not in self._captured and self._seen[key] >= GRAPH_AFTER_CALLS:
                captured = self._captured[key] = self._capture(stage, inputs)
            if captured is not None:
                return self._replay(stage, captured, inputs)
        feeds = {k: self._to_device(v) for k, v in inputs.items()}
        outputs = self.graphs[stage](feeds)
        return self._to_host(stage, outputs)

    def _to_device(self, array: np.ndarray) -> torch.Tensor:
        if not self.on_gpu:
            return torch.from_numpy(np.ascontiguousarray(array))
        return to_device(array, self.device)

    def _to_host(self, stage: str, outputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        if not self.on_gpu:
            return {k: v.numpy() for k, v in outputs.items()}
        return {k: v.numpy() for k, v in copy_back(outputs, self._streams[stage]).items()}

    def _capture(self, stage: str, inputs: dict[str, np.ndarray]) -> _Captured | None:
        """A CUDA graph of the stage for these shapes, with its own input and output buffers;
        None where this stage cannot be captured (an operator waits on the host)."""
        if sum(1 for k, c in self._captured.items() if k[0] == stage and c) >= self.max_graphs:
            return None
        static = {k: self._to_device(v) for k, v in inputs.items()}
        stream = self._streams[stage]
        try:
            self.graphs[stage](static)  # warm: allocations and host-side sizes settle
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            keep = self.graphs[stage].keep = []
            with torch.cuda.graph(graph, stream=stream):
                outputs = self.graphs[stage](static)
        except RuntimeError as exc:
            log.warning(
                "%s: no CUDA graph for %s (%s); it runs eagerly", self.tier.name, stage, exc
            )
            return None
        finally:
            self.graphs[stage].keep = None
        return _Captured(graph, static, outputs, _pinned_like(outputs), keep)

    def _replay(
        self, stage: str, captured: _Captured, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        for k, v in inputs.items():
            captured.inputs[k].copy_(torch.from_numpy(np.ascontiguousarray(v)), non_blocking=True)
        captured.graph.replay()
        host = copy_back(captured.outputs, self._streams[stage], captured.host)
        return {k: v.numpy().copy() for k, v in host.items()}  # the buffers serve every replay


# Shared with the tensorrt backend: the copies and the memory errors of any GPU stage.


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on the device, through pinned memory (an asynchronous copy)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array)).pin_memory()
    return tensor.to(device, non_blocking=True)


def copy_back(
    outputs: dict[str, torch.Tensor],
    stream: torch.cuda.Stream,
    host: dict[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """The device `outputs` in pinned host tensors (`host`, else new ones), once `stream` has
    written them: the wait is for that stream's work only."""
    host = host if host is not None else _pinned_like(outputs)
    for k, v in outputs.items():
        host[k].copy_(v, non_blocking=True)
    stream.synchronize()
    return host


def _pinned_like(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True) for k, v in tensors.items()}


@contextlib.contextmanager
def device_memory_errors(stage: str) -> Iterator[None]:
    """The GPU out of memory as `DeviceOutOfMemory` (this call fails, the next starts from a
    freed cache)."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        raise DeviceOutOfMemory(
            f"the GPU ran out of memory in the {stage} stage ({exc.args[0][:120]})"
        ) from exc
