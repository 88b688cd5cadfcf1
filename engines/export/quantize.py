"""INT8 tiers: ONNX Runtime static QDQ quantisation of a tier's encoder and generator, calibrated
on the activations the tier itself produces while streaming simulated clips.

    python -m engines.export.quantize service/models/preview service/models/preview-int8

Convolutions and matrix products are quantised: weights per output channel (int8), their input
activations per tensor (uint8, MinMax over the calibration run). The vocoder stays float: its
output is the waveform, where 8-bit activations are audible as noise. The states pass through
the graphs like any other activation, so the calibration feeds real streaming states, chunk
after chunk. `--stages` picks which of the encoder and generator to quantise.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quant_pre_process,
    quantize_static,
)

from engines.data.dataset import make_clip
from service.pipeline.backends.base import create_backend
from service.pipeline.contract import TierConfig, load_frames_tier
from service.pipeline.preprocess import resample_clip
from service.pipeline.streaming import StreamRunner

log = logging.getLogger(__name__)
QUANTISED = ("encoder", "generator")
# The operators that carry the arithmetic. Element-wise ones stay float: the generator's
# exponentials, logarithms and event rule must not see 8-bit rounding (a negative power or a
# flipped trigger comparison is not a small error).
QUANTISED_OPS = ("Conv", "MatMul", "Gemm")
CALIBRATION_SEED = 7_000_000
CHUNK_FRAMES = 30


class _Recorder:
    """A backend that runs the float tier and keeps every quantisable stage's inputs."""

    def __init__(self, tier: TierConfig) -> None:
        self.inner = create_backend("cpu", tier, threads=1)
        self.name, self.tier = "recorder", tier
        self.feeds: dict[str, list[dict[str, np.ndarray]]] = {s: [] for s in QUANTISED}

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if stage in self.feeds:
            self.feeds[stage].append({k: v.copy() for k, v in inputs.items()})
        return self.inner.run(stage, inputs)


class _Feeds(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def calibration_feeds(tier: TierConfig, clips: int) -> dict[str, list[dict[str, np.ndarray]]]:
    """Each quantised stage's inputs while the tier streams `clips` simulated clips."""
    recorder = _Recorder(tier)
    runner = StreamRunner(tier, recorder)
    for i in range(clips):
        record = make_clip(
            CALIBRATION_SEED + i, duration_s=4.0, fps=30, model_width=tier.width,
            model_height=tier.height,
        )  # fmt: skip
        n = tier.num_frames(record.duration_s)
        frames = resample_clip(record.times_s, record.frames, fps=tier.fps, num_frames=n)
        stream = runner.open()
        for start in range(0, n, CHUNK_FRAMES):
            chunk = type(frames)(
                start,
                frames.rgb[start : start + CHUNK_FRAMES],
                frames.age[start : start + CHUNK_FRAMES],
            )
            runner.push([stream], [chunk])
        runner.finish([stream])
    return recorder.feeds


def quantize_tier(
    source: Path, target: Path, *, clips: int = 16, stages: tuple[str, ...] = QUANTISED
) -> Path:
    unknown = set(stages) - set(QUANTISED)
    if unknown:
        raise ValueError(f"only {', '.join(QUANTISED)} can be quantised, not {sorted(unknown)}")
    tier = load_frames_tier(source.parent, source.name)
    feeds = calibration_feeds(tier, clips)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    with tempfile.TemporaryDirectory() as tmp:
        for stage in (s for s in tier.stages if s.name in stages):
            prepared = Path(tmp) / f"{stage.name}.onnx"
            quant_pre_process(str(source / stage.file), str(prepared), skip_symbolic_shape=True)
            quantize_static(
                str(prepared),
                str(target / stage.file),
                _Feeds(feeds[stage.name]),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                weight_type=QuantType.QInt8,
                activation_type=QuantType.QUInt8,
                calibrate_method=CalibrationMethod.MinMax,
                op_types_to_quantize=list(QUANTISED_OPS),
                extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
            )
            log.info("%s: %d calibration calls", stage.name, len(feeds[stage.name]))
    config = json.loads((target / "config.json").read_text())
    config["name"] = target.name
    config["quantization"] = {
        "stages": list(stages),
        "format": "QDQ, int8 weights per channel, uint8 activations per tensor (MinMax)",
        "calibration_clips": clips,
    }
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a float tier folder")
    parser.add_argument("target", type=Path, help="the INT8 tier folder to write")
    parser.add_argument("--clips", type=int, default=16, help="simulated calibration clips")
    parser.add_argument(
        "--stages", nargs="+", default=list(QUANTISED), choices=QUANTISED, help="stages to quantise"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    quantize_tier(args.source, args.target, clips=args.clips, stages=tuple(args.stages))


if __name__ == "__main__":
    main()
