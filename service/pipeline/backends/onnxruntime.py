"""The `cpu` backend: ONNX Runtime on the CPU.

One InferenceSession per stage, built once with explicit threading. ORT sessions are safe to
`run` from several threads at once; the engine still serialises per-window work (see
service.pipeline.engine) so a render uses the cores it was given and no more.
"""

from __future__ import annotations

import numpy as np

from service.pipeline.backends.base import BackendInfo
from service.pipeline.contract import StagedTier

try:
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover - the dependency is mandatory
    raise ImportError("the onnxruntime backend needs the 'onnxruntime' package") from exc


class OnnxRuntimeBackend:
    name = "cpu"

    def __init__(self, tier: StagedTier, *, threads: int = 0) -> None:
        self.tier = tier
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.enable_cpu_mem_arena = True
        self.sessions = {
            stage.name: ort.InferenceSession(
                str(tier.path / stage.file),
                sess_options=options,
                providers=["CPUExecutionProvider"],
            )
            for stage in tier.stages
        }
        for stage in tier.stages:
            got = {i.name for i in self.sessions[stage.name].get_inputs()}
            if got != stage.graph_inputs:
                raise ValueError(
                    f"{stage.file}: inputs {sorted(got)} != contract {sorted(stage.graph_inputs)}"
                )

    def info(self) -> BackendInfo:
        return BackendInfo(
            "cpu",
            f"CPU (ONNX Runtime {ort.__version__})",
            dict.fromkeys((stage.name for stage in self.tier.stages), "fp32"),
        )

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        session = self.sessions[stage]
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, inputs), strict=True))
