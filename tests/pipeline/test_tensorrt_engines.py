"""The tensorrt backend's engine building and caching, with a stand-in for NVIDIA's `tensorrt`
module (it needs a GPU, and this machine has none): every graph input gets a profile from the
contract, FP16 is asked for, an engine is built once per GPU, TensorRT version and graph, and a
change to any of them builds anew."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import onnx
import pytest

from service.config import Settings
from service.pipeline.backends import tensorrt as trt_backend
from service.pipeline.contract import load_frames_tier


class FakeTensorRT:
    """The part of the `tensorrt` API the builder uses, recording what it was asked."""

    __version__ = "10.13.0"

    class Logger:
        WARNING = 2

        def __init__(self, level: int) -> None:
            self.level = level

    BuilderFlag = SimpleNamespace(FP16="fp16")
    MemoryPoolType = SimpleNamespace(WORKSPACE="workspace")

    def __init__(self, *, parses: bool = True) -> None:
        self.parses = parses
        self.builds: list[dict] = []
        fake = self

        class Builder:
            def __init__(self, logger) -> None:
                self.build = {"flags": set(), "shapes": {}, "pools": {}}

            def create_network(self, flags):
                return SimpleNamespace()

            def create_builder_config(self):
                build = self.build
                return SimpleNamespace(
                    set_flag=build["flags"].add,
                    set_memory_pool_limit=build["pools"].__setitem__,
                    add_optimization_profile=lambda profile: None,
                )

            def create_optimization_profile(self):
                return SimpleNamespace(
                    set_shape=lambda name, *shapes: self.build["shapes"].__setitem__(name, shapes)
                )

            def build_serialized_network(self, network, config):
                fake.builds.append(self.build)
                return f"engine {len(fake.builds)} of {self.build['graph']}".encode()

        class OnnxParser:
            num_errors = 1

            def __init__(self, network, logger) -> None:
                self.network = network

            def parse_from_file(self, path: str) -> bool:
                builder_of_this_build = fake._current
                builder_of_this_build.build["graph"] = Path(path).name
                return fake.parses

            def get_error(self, i: int) -> str:
                return "unsupported operator"

        def make_builder(logger):
            fake._current = Builder(logger)
            return fake._current

        self.Builder = make_builder
        self.OnnxParser = OnnxParser


@pytest.fixture
def tier(tmp_path: Path):
    shipped = Settings().models_dir / "preview"
    copy = tmp_path / "models" / "preview"
    shutil.copytree(shipped, copy)
    return load_frames_tier(tmp_path / "models", "preview")


def test_every_graph_input_gets_a_profile_from_the_contract(tier) -> None:
    trt = FakeTensorRT()
    for stage in tier.stages:
        trt_backend.build_engine(trt, tier.path / stage.file, trt_backend.stage_profile(stage))
        build = trt.builds[-1]
        graph = onnx.load(str(tier.path / stage.file)).graph
        assert set(build["shapes"]) == {i.name for i in graph.input}
        assert build["flags"] == {"fp16"}
        for low, opt, high in build["shapes"].values():
            assert all(a <= b <= c for a, b, c in zip(low, opt, high, strict=True))
    frames = trt.builds[0]["shapes"]["frames"]  # the encoder: B, T, 3, 96, 96
    assert frames == ((1, 1, 3, 96, 96), (8, 32, 3, 96, 96), (64, 256, 3, 96, 96))


def test_an_engine_is_built_once_then_loaded(tier, tmp_path: Path) -> None:
    trt, cache = FakeTensorRT(), tmp_path / "engines"
    stage = tier.stages[0]
    first, built = trt_backend.cached_engine(trt, cache, tier, stage, "NVIDIA H200")
    assert built and len(trt.builds) == 1
    again, built = trt_backend.cached_engine(trt, cache, tier, stage, "NVIDIA H200")
    assert again == first and not built and len(trt.builds) == 1
    (path,) = (cache / "preview").glob("*.plan")
    assert path.name.startswith("encoder-nvidia-h200-trt10.13.0-")


def test_another_gpu_tensorrt_or_graph_builds_anew(tier, tmp_path: Path) -> None:
    trt, cache = FakeTensorRT(), tmp_path / "engines"
    stage = tier.stages[0]
    trt_backend.cached_engine(trt, cache, tier, stage, "NVIDIA H200")
    trt_backend.cached_engine(trt, cache, tier, stage, "NVIDIA L4")
    newer = FakeTensorRT()
    newer.__version__ = "10.14.0"
    trt_backend.cached_engine(newer, cache, tier, stage, "NVIDIA H200")
    graph = tier.path / stage.file
    graph.write_bytes(graph.read_bytes() + b"\0")  # another model under the same name
    trt_backend.cached_engine(trt, cache, tier, stage, "NVIDIA H200")
    assert len(trt.builds) + len(newer.builds) == 4
    assert len(list((cache / "preview").glob("*.plan"))) == 4


def test_a_graph_tensorrt_cannot_parse_is_a_clear_error(tier, tmp_path: Path) -> None:
    stage = tier.stages[0]
    with pytest.raises(RuntimeError, match=r"cannot parse encoder\.onnx: unsupported operator"):
        trt_backend.cached_engine(FakeTensorRT(parses=False), tmp_path, tier, stage, "GPU")
    assert not list(tmp_path.rglob("*.plan"))
