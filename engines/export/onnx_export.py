"""Export a trained checkpoint to a tier folder: three ONNX graphs and the config.json that states
their contract (service.pipeline.contract reads it).

    python -m engines.export.onnx_export runs/preview/model.pt engines/artifacts/preview
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


class _Encoder(nn.Module):
    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, frames: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        return self.encoder(frames, age)


def _export(
    module: nn.Module,
    args: tuple[torch.Tensor, ...],
    path: Path,
    inputs: dict[str, dict[int, str]],
    outputs: dict[str, dict[int, str]],
) -> None:
    torch.onnx.export(
        module,
        args,
        str(path),
        input_names=list(inputs),
        output_names=list(outputs),
        dynamic_axes={**inputs, **outputs},
        opset_version=OPSET,
        dynamo=False,
    )


def export_tier(checkpoint: Path, out_dir: Path) -> Path:
    cfg, encoder, generator, vocoder = load_checkpoint(checkpoint)
    out_dir.mkdir(parents=True, exist_ok=True)
    t, r = 8, cfg.mels_per_frame
    bt = {0: "B", 1: "T"}
    bm = {0: "B", 1: "M"}
    with torch.no_grad():
        _export(
            _Encoder(encoder),
            (torch.rand(1, t, 3, cfg.height, cfg.width), torch.zeros(1, t)),
            out_dir / "encoder.onnx",
            {"frames": bt, "age": bt},
            {"features": bt},
        )
        _export(
            generator,
            (torch.randn(1, t, cfg.feature_dim),),
            out_dir / "generator.onnx",
            {"features": bt},
            {"mel": bm, "onset": bm},
        )
        _export(
            vocoder,
            (torch.randn(1, t * r, cfg.n_mels),),
            out_dir / "vocoder.onnx",
            {"mel": bm},
            {"audio": {0: "B", 1: "S"}},
        )
    config = {
        "name": cfg.name,
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
                "left_context": encoder.left_context,
                "right_context": encoder.right_context,
            },
            "generator": {
                "file": "generator.onnx",
                "inputs": {"features": ["B", "T", cfg.feature_dim]},
                "outputs": {"mel": ["B", f"T*{r}", cfg.n_mels], "onset": ["B", f"T*{r}"]},
                "left_context": generator.left_context,
                "right_context": generator.right_context,
            },
            "vocoder": {
                "file": "vocoder.onnx",
                "inputs": {"mel": ["B", "M", cfg.n_mels]},
                "outputs": {"audio": ["B", f"M*{cfg.hop}"]},
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    export_tier(args.checkpoint, args.out_dir)


if __name__ == "__main__":
    main()
