"""The tensorrt backend's pure parts, which need neither NVIDIA's `tensorrt` nor a GPU: each
stage's optimisation profile, from its contract, against the graph it is built from, and where an
engine is cached, named by what makes it valid."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import onnx
import pytest

from service.config import SHIPPED_MODELS_DIR
from service.pipeline.backends.tensorrt import Profile, engine_path, stage_profile
from service.pipeline.contract import StageSpec
from service.pipeline.tier import load_tier

TIERS = ("motion", "preview", "export", "objects")


def stage(tier: str, name: str) -> StageSpec:
    return next(s for s in load_tier(SHIPPED_MODELS_DIR, tier).stages if s.name == name)


def test_each_size_the_service_varies_spans_its_range_and_the_rest_are_pinned() -> None:
    # B: batch 1..64 (opt 8), T: frames 1..256 (opt 32), M: mel frames 1..1024 (opt 128).
    encoder = stage_profile(stage("preview", "encoder")).shapes
    assert encoder == {
        "frames": ((1, 1, 3, 96, 96), (8, 32, 3, 96, 96), (64, 256, 3, 96, 96)),
        "age": ((1, 1), (8, 32), (64, 256)),
        "state_before": ((1, 12, 24, 24), (8, 12, 24, 24), (64, 12, 24, 24)),
        "state_started": ((1, 1), (8, 1), (64, 1)),
    }
    mel = stage_profile(stage("preview", "vocoder")).shapes["mel"]
    assert mel == ((1, 1, 64), (8, 128, 64), (64, 1024, 64))
    # N: objects per call 1..1024 (opt 64).
    assert stage_profile(stage("objects", "head")).shapes == {
        "features": ((1, 99), (64, 99), (1024, 99))
    }


@pytest.mark.parametrize("tier", TIERS)
def test_every_graph_input_gets_a_profile_that_fits_the_graph(tier: str) -> None:
    loaded = load_tier(SHIPPED_MODELS_DIR, tier)
    for spec in loaded.stages:
        shapes = stage_profile(spec).shapes
        graph = onnx.load(str(loaded.path / spec.file), load_external_data=False).graph
        assert set(shapes) == {i.name for i in graph.input}, spec.file
        for graph_input in graph.input:
            low, opt, high = shapes[graph_input.name]
            dims = graph_input.type.tensor_type.shape.dim
            assert len(low) == len(opt) == len(high) == len(dims), graph_input.name
            for d, a, b, c in zip(dims, low, opt, high, strict=True):
                if d.HasField("dim_value"):  # fixed in the graph: exactly that size
                    assert a == b == c == d.dim_value, graph_input.name
                else:  # symbolic: from one upwards
                    assert 1 == a <= b <= c, graph_input.name


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "encoder.onnx"
    path.parent.mkdir()
    shutil.copyfile(SHIPPED_MODELS_DIR / "preview" / "encoder.onnx", path)
    return path


PROFILE = Profile({"frames": ((1, 1, 3), (8, 32, 3), (64, 256, 3))})


def test_an_engine_is_kept_under_its_tier_named_by_stage_gpu_and_tensorrt(
    graph: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "engines"
    path = engine_path(cache, "preview", "encoder", graph, "NVIDIA H200", "10.13.0", PROFILE)
    assert path.parent == cache / "preview"
    assert re.fullmatch(r"encoder-nvidia-h200-trt10\.13\.0-[0-9a-f]{16}\.plan", path.name)
    odd = engine_path(cache, "preview", "encoder", graph, " NVIDIA RTX 6000 (Ada)/x", "10", PROFILE)
    assert odd.name.startswith("encoder-nvidia-rtx-6000-ada-x-trt10-")


def test_the_same_graph_gpu_tensorrt_and_profile_find_the_same_engine(
    graph: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "engines"
    first = engine_path(cache, "preview", "encoder", graph, "NVIDIA H200", "10.13.0", PROFILE)
    again = engine_path(cache, "preview", "encoder", graph, "NVIDIA H200", "10.13.0", PROFILE)
    # The graph's bytes count, not where it lies: a copy elsewhere finds the same engine.
    moved = tmp_path / "elsewhere.onnx"
    shutil.copyfile(graph, moved)
    copy = engine_path(cache, "preview", "encoder", moved, "NVIDIA H200", "10.13.0", PROFILE)
    assert first == again == copy


def test_another_gpu_tensorrt_graph_or_profile_names_another_engine(
    graph: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "engines"

    def path(gpu: str = "NVIDIA H200", trt: str = "10.13.0", profile: Profile = PROFILE) -> Path:
        return engine_path(cache, "preview", "encoder", graph, gpu, trt, profile)

    paths = [path(), path(gpu="NVIDIA L4"), path(trt="10.14.0")]
    paths.append(path(profile=Profile({"frames": ((1, 1, 3), (8, 32, 3), (64, 512, 3))})))
    graph.write_bytes(graph.read_bytes() + b"\0")  # another model under the same name
    paths.append(path())
    assert len(set(paths)) == 5
