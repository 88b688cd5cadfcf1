"""The `tensorrt` backend: TensorRT engines built from the tier's ONNX graphs, in FP16.

    - one engine per stage, built with FP16 allowed (TensorRT keeps a layer in FP32 where FP16
      would lose it) and one optimisation profile over the sizes the service sends: batch 1 to
      MAX_BATCH (a render is batch 1; the live worker batches its sessions' frames), frames per
      call 1 to MAX_FRAMES (a decoded batch; one live frame), objects per call 1 to MAX_OBJECTS;
    - engines are cached on disk (`FOLEY_ENGINE_CACHE_DIR`, else a folder beside the tier),
      named by what makes them valid: the GPU's name, TensorRT's version, the graph's SHA-256
      and the profile. The first start builds them (minutes); the next loads them (seconds);
      a new GPU, TensorRT or model builds anew, never loads a stale engine;
    - inputs and outputs are torch tensors on the GPU (pinned host copies), one CUDA stream per
      stage, as in the cuda backend.

Building and caching are functions of the `tensorrt` module they are given; what decides an
engine (its profile, its cache path) is pure and tested on any machine; building and running
one needs the GPU.

Thread-safe: one lock per stage (an execution context is one caller's at a time).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from service.pipeline.backends.base import BackendInfo, backend_present, require
from service.pipeline.backends.cuda import copy_back, device_memory_errors, to_device
from service.pipeline.contract import StagedTier, StageSpec

log = logging.getLogger(__name__)
MAX_BATCH, MAX_FRAMES, MAX_OBJECTS = 64, 256, 1024
# Each symbolic input size of the contract: (min, opt, max) of the profile.
PROFILE_SIZES = {
    "B": (1, 8, MAX_BATCH),
    "T": (1, 32, MAX_FRAMES),
    "M": (1, 128, 4 * MAX_FRAMES),
    "N": (1, 64, MAX_OBJECTS),
}
WORKSPACE_BYTES = 2 << 30


@dataclass(frozen=True)
class Profile:
    """Per input name: (min, opt, max) shapes."""

    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]

    def key(self) -> str:
        return repr(sorted(self.shapes.items()))


def stage_profile(stage: StageSpec) -> Profile:
    """The optimisation profile of a stage, from its contract's input shapes."""
    shapes = {}
    inputs = {**stage.inputs, **{f"state_{k}": v for k, v in stage.state.items()}}
    for name, dims in inputs.items():
        low, opt, high = [], [], []
        for dim in dims:
            sizes = PROFILE_SIZES[dim] if isinstance(dim, str) else (dim, dim, dim)
            low.append(sizes[0])
            opt.append(sizes[1])
            high.append(sizes[2])
        shapes[name] = (tuple(low), tuple(opt), tuple(high))
    return Profile(shapes)


def engine_path(
    cache_dir: Path,
    tier: str,
    stage: str,
    graph: Path,
    gpu: str,
    trt_version: str,
    profile: Profile,
) -> Path:
    """Where this stage's engine lives: its name says what it was built from and for."""
    digest = hashlib.sha256()
    for part in (gpu, trt_version, hashlib.sha256(graph.read_bytes()).hexdigest(), profile.key()):
        digest.update(part.encode() + b"\0")
    gpu_slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower()
    return cache_dir / tier / f"{stage}-{gpu_slug}-trt{trt_version}-{digest.hexdigest()[:16]}.plan"


def build_engine(trt: ModuleType, graph: Path, profile: Profile, *, fp16: bool = True) -> bytes:
    """A serialised engine for the ONNX graph at `graph`."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch: the only kind TensorRT 10 has
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(graph)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT cannot parse {graph.name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    optimisation = builder.create_optimization_profile()
    for name, (low, opt, high) in profile.shapes.items():
        optimisation.set_shape(name, low, opt, high)
    config.add_optimization_profile(optimisation)
    serialised = builder.build_serialized_network(network, config)
    if serialised is None:
        raise RuntimeError(f"TensorRT could not build an engine for {graph.name}")
    return bytes(serialised)


def cached_engine(
    trt: ModuleType,
    cache_dir: Path,
    tier: StagedTier,
    stage: StageSpec,
    gpu: str,
) -> tuple[bytes, bool]:
    """The stage's serialised engine, from the cache or built now and cached. -> (engine,
    whether it was built)."""
    profile = stage_profile(stage)
    graph = tier.path / stage.file
    path = engine_path(cache_dir, tier.name, stage.name, graph, gpu, trt.__version__, profile)
    if path.is_file():
        return path.read_bytes(), False
    log.info("%s %s: building a TensorRT engine for %s (once)", tier.name, stage.name, gpu)
    engine = build_engine(trt, graph, profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(engine)
    os.replace(partial, path)  # two processes building at once: each writes whole, one wins
    return engine, True


class TensorRTBackend:
    name = "tensorrt"

    def __init__(self, tier: StagedTier, *, cache_dir: Path | None = None) -> None:
        require("tensorrt", importlib.util.find_spec("tensorrt") is not None,
                "the tensorrt package is not installed (NVIDIA's wheel for this CUDA)")  # fmt: skip
        require("tensorrt", backend_present("cuda"), "torch finds no CUDA device")
        import tensorrt as trt
        import torch

        self.tier, self.torch = tier, torch
        self.device = torch.device("cuda")
        self.gpu = torch.cuda.get_device_name(self.device)
        cache_dir = cache_dir or tier.path / "tensorrt"
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engines, self.contexts = {}, {}
        for stage in tier.stages:
            blob, _ = cached_engine(trt, cache_dir, tier, stage, self.gpu)
            self.engines[stage.name] = runtime.deserialize_cuda_engine(blob)
            self.contexts[stage.name] = self.engines[stage.name].create_execution_context()
        self._locks = {s.name: threading.Lock() for s in tier.stages}
        self._streams = {s.name: torch.cuda.Stream(self.device) for s in tier.stages}

    def info(self) -> BackendInfo:
        memory = int(self.torch.cuda.memory_reserved(self.device))
        stages = [s.name for s in self.tier.stages]
        return BackendInfo("tensorrt", self.gpu, dict.fromkeys(stages, "fp16"), memory)

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        stream = self._streams[stage]
        with self._locks[stage], self.torch.cuda.stream(stream), device_memory_errors(stage):
            return self._run(stage, inputs)

    def _run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch, engine, context = self.torch, self.engines[stage], self.contexts[stage]
        kept = []
        for name, array in inputs.items():
            tensor = to_device(array, self.device)
            kept.append(tensor)
            context.set_input_shape(name, tuple(tensor.shape))
            context.set_tensor_address(name, tensor.data_ptr())
        outputs = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if name in inputs:
                continue
            shape = tuple(context.get_tensor_shape(name))
            dtype = _TORCH_DTYPES[str(engine.get_tensor_dtype(name)).rsplit(".", 1)[-1]]
            outputs[name] = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
            context.set_tensor_address(name, outputs[name].data_ptr())
        stream = self._streams[stage]
        if not context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError(f"TensorRT could not run the {stage} stage")
        host = copy_back(outputs, stream)
        return {
            k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in host.items()
        }


_TORCH_DTYPES = {"FLOAT": "float32", "HALF": "float16", "INT64": "int64", "INT32": "int32",
                 "BOOL": "bool", "BF16": "bfloat16"}  # fmt: skip
