"""Export the object-level model to a tier folder the service runs (service.pipeline.contacts):

    localiser.onnx  frames, previous [B, 3, H, W] -> the K strongest objects per frame
    head.onnx       features [N, F] -> probability [N], u [N] (contact time in interval units)
    config.json     kind "contacts": picture size, the head's settings, the renderer's voices

    python -m engines.export.contacts [--localiser service/models/objects/localiser.pt]
        [--head service/models/objects/contact_head.pt] [--out service/models/objects]

The renderer's voices are each object material's modes as the simulator's sound model makes them
for an object of the reference size (engines.audio.modal); the renderer moves them to the size
the localiser reads, so a generated event has the timbre the training clips give that material
and size.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from engines.audio import modal
from engines.audio.render import GAIN
from engines.export.onnx_export import OPSET
from engines.models.localiser import Localiser
from engines.sim.materials import OBJECT_MATERIALS, material
from engines.tracks.head import ContactHead, load_head
from engines.train.localiser import HEIGHT, WIDTH
from service.config import SHIPPED_MODELS_DIR
from service.pipeline.contacts.features import HeadConfig

log = logging.getLogger(__name__)
OBJECTS = SHIPPED_MODELS_DIR / "objects"
MAX_OBJECTS = 6
VERSION = "0.2.0"
VOICE_SHAPE = "sphere"  # the localiser does not tell shapes apart
LOCALISER_OUTPUTS = ("score", "xy", "radius", "materials", "size")  # engines.models.localiser.Peaks


class _Located(nn.Module):
    def __init__(self, localiser: Localiser, k: int) -> None:
        super().__init__()
        self.localiser, self.k = localiser, k

    def forward(self, frames: torch.Tensor, previous: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.localiser.located(frames, previous, self.k))


class _Head(nn.Module):
    def __init__(self, head: ContactHead) -> None:
        super().__init__()
        self.head = head

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logit, u = self.head(features)
        return torch.sigmoid(logit), u


def voices(sample_rate: int) -> list[dict]:
    """Per object material (in OBJECT_MATERIALS order): its modes at the reference size, its
    contact time (hardness) and loudness."""
    out = []
    for name in OBJECT_MATERIALS:
        ac = material(name).acoustics
        ratios = np.asarray(modal.MODE_RATIOS[VOICE_SHAPE]) ** (1.0 + ac.stretch)
        freqs = ac.f0_hz * ratios
        keep = freqs < min(18_000.0, 0.45 * sample_rate)
        amps = ratios**-0.5 / (ratios**-0.5).sum()
        out.append(
            {
                "material": name,
                "freqs_hz": freqs[keep].round(2).tolist(),
                "decays": (np.log(1000.0) / ac.t60_s * ratios[keep] ** 0.7).round(3).tolist(),
                "amps": amps[keep].round(5).tolist(),
                "contact_ms": ac.contact_ms,
                "loudness": ac.loudness,
            }
        )
    return out


MAX_RING_S = 1.5  # the longest an event rings in the service, at most the simulator's


def renderer_config(sample_rate: int) -> dict:
    """The renderer's part of an event tier's config.json: every object material's voice and
    the simulator's level and click settings (service.pipeline.contacts.render reads it)."""
    return {
        "materials": list(OBJECT_MATERIALS),
        "voices": voices(sample_rate),
        "gain": GAIN,
        "impulse_exponent": modal.IMPULSE_EXPONENT,
        "click_level": modal.CLICK_LEVEL,
        "max_ring_s": MAX_RING_S,
        "voice_size_m": modal.REFERENCE_SIZE_M,
    }


def export(localiser_pt: Path, head_pt: Path, out: Path, *, name: str = "objects") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    localiser = Localiser(materials=len(OBJECT_MATERIALS))
    localiser.load_state_dict(torch.load(localiser_pt, weights_only=True)["model"])
    localiser.eval()
    head = load_head(head_pt)
    config: HeadConfig = head.config
    frames = torch.rand(2, 3, HEIGHT, WIDTH)
    with torch.no_grad():
        torch.onnx.export(
            _Located(localiser, MAX_OBJECTS),
            (frames, frames),
            str(out / "localiser.onnx"),
            input_names=["frames", "previous"],
            output_names=list(LOCALISER_OUTPUTS),
            dynamic_axes={n: {0: "B"} for n in ("frames", "previous", *LOCALISER_OUTPUTS)},
            opset_version=OPSET,
            dynamo=False,
        )
        torch.onnx.export(
            _Head(head),
            (torch.randn(4, config.features),),
            str(out / "head.onnx"),
            input_names=["features"],
            output_names=["probability", "u"],
            dynamic_axes={"features": {0: "N"}, "probability": {0: "N"}, "u": {0: "N"}},
            opset_version=OPSET,
            dynamo=False,
        )
    sample_rate = 48000
    tier = {
        "name": name,
        "version": VERSION,
        "kind": "contacts",
        "video": {"width": WIDTH, "height": HEIGHT, "letterbox": True},
        "audio": {"sample_rate": sample_rate},
        "stages": {
            "localiser": {
                "file": "localiser.onnx",
                "inputs": {"frames": ["B", 3, HEIGHT, WIDTH], "previous": ["B", 3, HEIGHT, WIDTH]},
                "outputs": {
                    "score": ["B", MAX_OBJECTS],
                    "xy": ["B", MAX_OBJECTS, 2],
                    "radius": ["B", MAX_OBJECTS],
                    "materials": ["B", MAX_OBJECTS, len(OBJECT_MATERIALS)],
                    "size": ["B", MAX_OBJECTS],
                },
            },
            "head": {
                "file": "head.onnx",
                "inputs": {"features": ["N", config.features]},
                "outputs": {"probability": ["N"], "u": ["N"]},
                "config": asdict(config),
            },
            "renderer": renderer_config(sample_rate),
        },
    }
    (out / "config.json").write_text(json.dumps(tier, indent=1) + "\n")
    log.info("wrote %s", out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--localiser", type=Path, default=OBJECTS / "localiser.pt")
    parser.add_argument("--head", type=Path, default=OBJECTS / "contact_head.pt")
    parser.add_argument("--out", type=Path, default=OBJECTS)
    parser.add_argument("--name", default="objects")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    export(args.localiser, args.head, args.out, name=args.name)


if __name__ == "__main__":
    main()
