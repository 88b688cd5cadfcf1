"""What the calibrations of shipped tiers share (engines.eval.loudness, engines.eval.precision):
their command line, the typical clips they render, and writing a result into a tier's config."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np

from engines.eval.scenes import scene_clip

CALIBRATION_SEED = 7_000_000  # apart from the evaluation and validation sets
KINDS = ("drop", "roll", "multi", "slide")
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


def parser(doc: str, clips: int) -> argparse.ArgumentParser:
    """--tiers, --clips (default `clips`), --models, --write."""
    parsed = argparse.ArgumentParser(description=doc.splitlines()[0])
    parsed.add_argument("--tiers", nargs="+", default=["preview", "export", "objects"])
    parsed.add_argument(
        "--clips", type=int, default=clips, help="simulated scenes besides the sample"
    )
    parsed.add_argument("--models", type=Path, default=None, help="default: FOLEY_MODELS_DIR")
    parsed.add_argument("--write", action="store_true")
    return parsed


def typical_clips(workdir: Path, count: int) -> list[tuple[str, Path]]:
    """The sample and `count` fresh simulated scenes, encoded in `workdir`."""
    clips = [("sample", SAMPLE)]
    for i in range(count):
        seed = CALIBRATION_SEED + i
        made = scene_clip(
            seed,
            "30",
            workdir,
            holdout=False,
            duration_s=5.0,
            size=(320, 180),
            kind=KINDS[i % len(KINDS)],
        )
        clips.append((f"{KINDS[i % len(KINDS)]} {seed}", made.video))
    return clips


def graphic_clip(path: Path, seconds: float = 2.0, size: tuple[int, int] = (160, 120)) -> Path:
    """A white square sliding over a flat dark background, 30 fps: nothing like the training
    scenes, and the kind of input where rounding tips a detector's near ties."""
    width, height = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(round(seconds * 30)):
            image = np.full((height, width, 3), 40, np.uint8)
            x = (3 * k) % (width - 8)
            image[8:16, x : x + 8] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def write_config(models: Path, tier: str, update: Callable[[dict], None]) -> Path:
    """Apply `update` to the tier's config.json, kept in its own indentation."""
    path = models / tier / "config.json"
    text = path.read_text()
    raw = json.loads(text)
    update(raw)
    indent = len(text.splitlines()[1]) - len(text.splitlines()[1].lstrip())
    path.write_text(json.dumps(raw, indent=indent) + "\n")
    return path
