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

import logging
import tempfile
from pathlib import Path

import numpy as np

from engines.eval import calibrate
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
LIVE_TOLERANCE_DB = 3.0


def offline_gains(
    models: Path, tier: str, clips: list[tuple[str, Path]], workdir: Path
) -> dict[str, float]:
    """The loudness gain each clip's offline render takes with `tier` (silent renders left out:
    they take none)."""
    engine = FoleyEngine.load(Settings(models_dir=models), tier)
    gains = {}
    for name, video in clips:
        result = engine.render(video, workdir / "out.wav", RenderOptions(format="wav"))
        levelling = result.levelling
        if levelling is not None and levelling.loudness.integrated_lufs is not None:
            gains[name] = levelling.gain_db
    return gains


def main(argv: list[str] | None = None) -> None:
    args = calibrate.parser(__doc__, clips=8).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = args.models or Settings().models_dir
    with tempfile.TemporaryDirectory() as tmp:
        clips = calibrate.typical_clips(Path(tmp), args.clips)
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

                def store(raw: dict, live: float = live) -> None:
                    raw["audio"]["live_gain_db"] = round(live, 2)

                print(f"  wrote {calibrate.write_config(models, tier, store)}")


if __name__ == "__main__":
    main()
