"""Export the contact head to a `motion` tier folder the service runs (service.pipeline.motion):

    head.onnx     windows [B, WINDOW * CHANNELS, H / 4, W / 4] -> probability, u, strength
                  [B, H / 8, W / 8], material [B, M, H / 8, W / 8] (probabilities); a head that
                  reads gliding (the rule) also glide, slowing, glide_x and glide_y [B]
    vocoder.onnx  conditioning [B, M + 1] -> amps, decays [B, K], click, click_s [B]: the
                  trained vocoder (engines.motion.vocoder) from `--vocoder` (weights)
    config.json   kind "motion": picture size, the head's settings, the vocoder's bank

    python -m engines.motion.export (--checkpoint runs/motion/head.pt | --rule)
        [--out service/models/motion] [--threshold 0.5] [--offset-ms 0]
        [--vocoder service/models/motion/vocoder.pt]

`--rule`: the head with nothing learned (engines.motion.rule), the shipped one; a checkpoint:
a trained ContactHead (engines.motion.train). The threshold and the offset are calibrated on
real clips (`python -m engines.eval.real --tier motion`). The vocoder's weights are the student
engines.motion.train_vocoder distilled; the shipped ones lie beside the tier (vocoder.pt).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import torch
from torch import nn

from engines.audio.modal import IMPULSE_EXPONENT
from engines.audio.render import GAIN
from engines.export.contacts import MAX_RING_S
from engines.export.onnx_export import OPSET
from engines.motion import vocoder as voc
from engines.motion.evaluate import load_model
from engines.motion.features import HEIGHT, MATERIALS, WIDTH
from engines.motion.rule import VelocityLossHead
from service.config import SHIPPED_MODELS_DIR
from service.pipeline.motion.flow import FACTOR
from service.pipeline.motion.window import CHANNELS, WINDOW

log = logging.getLogger(__name__)
ARTIFACTS = SHIPPED_MODELS_DIR
VOCODER = ARTIFACTS / "motion" / "vocoder.pt"
VERSION = "0.1.0"
OUTPUTS = ("probability", "u", "strength", "material")
# [B]: the interval's gliding speed, its slowing and its heading (a unit vector)
GLIDE_OUTPUTS = ("glide", "slowing", "glide_x", "glide_y")
SAMPLE_RATE = 48000
# The head's log strength of a typical contact, rendered at an impulse of 1 N s (a trained head's
# scale is engines.motion.data.strength_of; the rule's, the log of the velocity lost over 5 x 5
# blocks, a stick's strike reads about 5.5). Only the spread around it is heard once the track
# is loudness-normalised.
REFERENCE_STRENGTH = {"trained": 3.0, "rule": 5.5}


class _Served(nn.Module):
    """The head as the service reads it: probabilities, not logits."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, windows: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.head(windows)
        return (
            torch.sigmoid(out["logit"][:, 0]),
            out["u"][:, 0],
            out["strength"][:, 0],
            torch.softmax(out["material"], dim=1),
            *(out[name] for name in GLIDE_OUTPUTS if name in out),
        )


def export(
    head: nn.Module,
    out: Path,
    *,
    name: str = "motion",
    threshold: float,
    offset_s: float,
    reference_strength: float,
    live_gain_db: float = 0.0,
    vocoder: Path = VOCODER,
) -> Path:
    voice = voc.load_voice(vocoder)
    out.mkdir(parents=True, exist_ok=True)
    h, w = HEIGHT // FACTOR, WIDTH // FACTOR
    h2, w2 = (h + 1) // 2, (w + 1) // 2
    windows = torch.zeros(2, WINDOW * CHANNELS, h, w)
    with torch.no_grad():
        glides = all(name in head.eval()(windows) for name in GLIDE_OUTPUTS)
    outputs = OUTPUTS + (GLIDE_OUTPUTS if glides else ())
    with torch.no_grad():
        torch.onnx.export(
            _Served(head.eval()),
            (windows,),
            str(out / "head.onnx"),
            input_names=["windows"],
            output_names=list(outputs),
            dynamic_axes={n: {0: "B"} for n in ("windows", *outputs)},
            opset_version=OPSET,
            dynamo=False,
        )
    condition = torch.zeros(2, len(MATERIALS) + 1)
    with torch.no_grad():
        torch.onnx.export(
            voice,
            (condition,),
            str(out / "vocoder.onnx"),
            input_names=["condition"],
            output_names=list(voc.OUTPUTS),
            dynamic_axes={n: {0: "B"} for n in ("condition", *voc.OUTPUTS)},
            opset_version=OPSET,
            dynamo=False,
        )
    tier = {
        "name": name,
        "version": VERSION,
        "kind": "motion",
        "video": {"width": WIDTH, "height": HEIGHT, "letterbox": True},
        "audio": {"sample_rate": SAMPLE_RATE, "live_gain_db": live_gain_db},
        "stages": {
            "head": {
                "file": "head.onnx",
                "inputs": {"windows": ["B", WINDOW * CHANNELS, h, w]},
                "outputs": {
                    "probability": ["B", h2, w2],
                    "u": ["B", h2, w2],
                    "strength": ["B", h2, w2],
                    "material": ["B", len(MATERIALS), h2, w2],
                    **({name: ["B"] for name in GLIDE_OUTPUTS} if glides else {}),
                },
                "config": {
                    "threshold": threshold,
                    "offset_s": offset_s,
                    "reference_strength": reference_strength,
                    "material_confidence": 0.6,
                    "default_material": "wood",
                },
            },
            "vocoder": {
                "file": "vocoder.onnx",
                "inputs": {"condition": ["B", len(MATERIALS) + 1]},
                "outputs": {
                    "amps": ["B", voc.MODES],
                    "decays": ["B", voc.MODES],
                    "click": ["B"],
                    "click_s": ["B"],
                },
                "config": {
                    "materials": list(MATERIALS),
                    "freqs_hz": voc.mode_freqs().round(3).tolist(),
                    "impulse_exponent": IMPULSE_EXPONENT,
                    "log_impulse_range": list(voc.LOG_IMPULSE_RANGE),
                    "max_ring_s": MAX_RING_S,
                    "gain": GAIN,
                },
            },
        },
    }
    (out / "config.json").write_text(json.dumps(tier, indent=1) + "\n")
    log.info("wrote %s", out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", type=Path, help="a trained head")
    which.add_argument("--rule", action="store_true", help="the head with nothing learned")
    parser.add_argument("--out", type=Path, default=ARTIFACTS / "motion")
    parser.add_argument("--name", default="motion")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--offset-ms", type=float, default=0.0)
    parser.add_argument("--reference-strength", type=float, help="default: the head's own")
    parser.add_argument("--vocoder", type=Path, default=VOCODER, help="the vocoder's weights")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    head = VelocityLossHead() if args.rule else load_model(args.checkpoint)
    reference = args.reference_strength
    if reference is None:
        reference = REFERENCE_STRENGTH["rule" if args.rule else "trained"]
    export(
        head,
        args.out,
        name=args.name,
        threshold=args.threshold,
        offset_s=args.offset_ms / 1000,
        reference_strength=reference,
        vocoder=args.vocoder,
    )


if __name__ == "__main__":
    main()
