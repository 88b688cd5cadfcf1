"""Export a trained checkpoint to a tier folder: three ONNX graphs and the config.json that states
their contract (service.pipeline.contract reads it). Each graph is its stage's streaming `step`:
the stage's inputs plus its state (`state_<name>`) -> its outputs plus the next state
(`next_<name>`), so one graph serves a whole clip in one call and a live stream frame by frame.

    python -m engines.export.onnx_export runs/preview/model.pt service/models/preview
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import torch
from torch import nn

from engines.models.checkpoint import load_checkpoint

log = logging.getLogger(__name__)
OPSET = 18


class _Streaming(nn.Module):
    """A stage's `step` as a graph of flat tensors: its inputs, then its state by name ->
    its outputs, then its next state in the same order."""

    def __init__(self, stage: nn.Module, n_inputs: int, state: list[str]) -> None:
        super().__init__()
        self.stage, self.n_inputs, self.state = stage, n_inputs, state

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = args[: self.n_inputs]
        state = dict(zip(self.state, args[self.n_inputs :], strict=True))
        *outputs, state = self.stage.step(*inputs, state)
        return (*outputs, *(state[name] for name in self.state))


def _export(
    stage: nn.Module,
    inputs: dict[str, torch.Tensor],
    axes: dict[str, dict[int, str]],
    path: Path,
) -> dict[str, list[int | str]]:
    """Export `stage.step`; `axes` names the dynamic axes of its inputs and outputs. Returns the
    state's contract: name -> shape, "B" for the batch."""
    state = stage.initial_state(1)
    names = list(state)
    state_axes = {f"state_{n}": {0: "B"} for n in names} | {f"next_{n}": {0: "B"} for n in names}
    torch.onnx.export(
        _Streaming(stage, len(inputs), names),
        (*inputs.values(), *state.values()),
        str(path),
        input_names=[*inputs, *(f"state_{n}" for n in names)],
        output_names=[*(k for k in axes if k not in inputs), *(f"next_{n}" for n in names)],
        dynamic_axes=axes | state_axes,
        opset_version=OPSET,
        dynamo=False,
    )
    return {n: ["B", *v.shape[1:]] for n, v in state.items()}


def export_tier(checkpoint: Path, out_dir: Path, *, name: str | None = None) -> Path:
    """Write the tier folder; `name` is the tier's name (default: the model's)."""
    cfg, encoder, generator, vocoder = load_checkpoint(checkpoint)
    out_dir.mkdir(parents=True, exist_ok=True)
    t, r = 8, cfg.mels_per_frame
    bt = {0: "B", 1: "T"}
    bm = {0: "B", 1: "M"}
    with torch.no_grad():
        encoder_state = _export(
            encoder,
            {"frames": torch.rand(1, t, 3, cfg.height, cfg.width), "age": torch.zeros(1, t)},
            {"frames": bt, "age": bt, "features": bt},
            out_dir / "encoder.onnx",
        )
        generator_state = _export(
            generator,
            {"features": torch.randn(1, t, cfg.feature_dim)},
            {"features": bt, "mel": bm, "onset": bm, "events": bm},
            out_dir / "generator.onnx",
        )
        vocoder_state = _export(
            vocoder,
            {"mel": torch.randn(1, t * r, cfg.n_mels)},
            {"mel": bm, "audio": {0: "B", 1: "S"}},
            out_dir / "vocoder.onnx",
        )
    config = {
        "name": name or cfg.name,
        "version": cfg.version,
        "video": {"fps": cfg.fps, "width": cfg.width, "height": cfg.height},
        "audio": {
            "sample_rate": cfg.sample_rate,
            "hop": cfg.hop,
            "n_mels": cfg.n_mels,
            "mel_n_fft": cfg.mel_n_fft,
            "mel_fmin": cfg.mel_fmin,
            "mel_fmax": cfg.mel_fmax,
            "log_floor": cfg.log_floor,
        },
        "feature_dim": cfg.feature_dim,
        "stages": {
            "encoder": {
                "file": "encoder.onnx",
                "inputs": {"frames": ["B", "T", 3, cfg.height, cfg.width], "age": ["B", "T"]},
                "outputs": {"features": ["B", "T", cfg.feature_dim]},
                "state": encoder_state,
                "left_context": encoder.left_context,
                "right_context": encoder.right_context,
            },
            "generator": {
                "file": "generator.onnx",
                "inputs": {"features": ["B", "T", cfg.feature_dim]},
                "outputs": {
                    "mel": ["B", f"T*{r}", cfg.n_mels],
                    "onset": ["B", f"T*{r}"],
                    "events": ["B", f"T*{r}"],
                },
                "state": generator_state,
                "left_context": generator.left_context,
                "right_context": generator.right_context,
            },
            "vocoder": {
                "file": "vocoder.onnx",
                "inputs": {"mel": ["B", "M", cfg.n_mels]},
                "outputs": {"audio": ["B", f"M*{cfg.hop}"]},
                "state": vocoder_state,
                "left_context": vocoder.left_context,
                "right_context": vocoder.right_context,
            },
        },
        "parameters": {
            "encoder": sum(p.numel() for p in encoder.parameters()),
            "generator": sum(p.numel() for p in generator.parameters()),
            "vocoder": sum(p.numel() for p in vocoder.parameters()),
        },
        "model": cfg.to_dict(),
    }
    path = out_dir / "config.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    log.info("exported %s", out_dir)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--name", help="the tier's name (default: the model's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    export_tier(args.checkpoint, args.out_dir, name=args.name)


if __name__ == "__main__":
    main()
