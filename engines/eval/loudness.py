"""Calibrate each tier's live gain against its offline renders:

    python -m engines.eval.loudness [--tiers preview export objects] [--clips 8] [--models DIR]
                                    [--write]

Offline renders are normalised per render (service.media.loudness: one gain to -23 LUFS); a
live stream cannot be measured before it is heard, so it takes one fixed gain per tier. Here each
tier renders the bundled sample and `--clips` fresh simulated scenes (the scene kinds in turn,
at 30 fps, seeds from CALIBRATION_SEED) offline at the default target; the live gain is the
median of the gains those renders took. Prints each clip's gain and how far the live gain is
from it (the target: within LIVE_TOLERANCE_DB for typical clips); `--write` stores the live
gain in each tier's config.json (`audio.live_gain_db`).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from engines.eval.scenes import scene_clip
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
CALIBRATION_SEED = 7_000_000  # apart from the evaluation and validation sets
KINDS = ("drop", "roll", "multi", "slide")
LIVE_TOLERANCE_DB = 3.0
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


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


def offline_gains(
    models: Path, tier: str, clips: list[tuple[str, Path]], workdir: Path
) -> dict[str, float]:
    """The loudness gain each clip's offline render takes with `tier` (silent renders left out:
    they take none)."""
    engine = FoleyEngine.load(Settings(models_dir=models, default_tier=tier))
    gains = {}
    for name, video in clips:
        result = engine.render(video, workdir / "out.wav", RenderOptions(format="wav"))
        levelling = result.levelling
        if levelling is not None and levelling.loudness.integrated_lufs is not None:
            gains[name] = levelling.gain_db
    return gains


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiers", nargs="+", default=["preview", "export", "objects"])
    parser.add_argument("--clips", type=int, default=8, help="simulated scenes besides the sample")
    parser.add_argument("--models", type=Path, default=None, help="default: FOLEY_MODELS_DIR")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = args.models or Settings().models_dir
    with tempfile.TemporaryDirectory() as tmp:
        clips = typical_clips(Path(tmp), args.clips)
        for tier in args.tiers:
            gains = offline_gains(models, tier, clips, Path(tmp))
            live = float(np.median(list(gains.values())))
            within = sum(abs(gain - live) <= LIVE_TOLERANCE_DB for gain in gains.values())
            print(f"{tier}: live gain {live:+.1f} dB, within {LIVE_TOLERANCE_DB:g} dB of the "
                  f"offline gain of {within} of {len(gains)} renders")  # fmt: skip
            for name, gain in gains.items():
                print(f"  {name:<16} offline {gain:+6.1f} dB   live - offline "
                      f"{live - gain:+6.1f} dB")  # fmt: skip
            if args.write:
                path = models / tier / "config.json"
                text = path.read_text()
                raw = json.loads(text)
                raw["audio"]["live_gain_db"] = round(live, 2)
                indent = len(text.splitlines()[1]) - len(text.splitlines()[1].lstrip())
                path.write_text(json.dumps(raw, indent=indent) + "\n")
                print(f"  wrote {path}")


if __name__ == "__main__":
    main()
