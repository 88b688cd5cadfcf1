"""`foley tiers`: the installed model tiers, each loaded, with its precision and speed here."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING

from service.cli.base import EXIT_OK
from service.config import Settings
from service.errors import ModelConfigError
from service.pipeline.loading import load_engine
from service.pipeline.tiers import listed_tiers
from service.pipeline.types import RenderOptions

if TYPE_CHECKING:
    from service.pipeline.loading import Engine

NAME, HELP = "tiers", "list the model tiers"
LOG_LEVEL = logging.WARNING
SPEED_CLIP_S, SPEED_SIZE = 4.0, (640, 360)  # what each tier is timed on


def arguments(tiers: argparse.ArgumentParser) -> None:
    tiers.add_argument("--no-speed", action="store_true", help="skip timing each tier")


def run(args: argparse.Namespace) -> int:
    settings = Settings()
    found = listed_tiers(settings)
    if not found:
        raise ModelConfigError(
            f"no tiers in {settings.models_dir}; FOLEY_MODELS_DIR names the folder that holds them"
        )
    print(f"{'tier':<10} {'kind':<9} {'version':<8} {'size':>8}  {'speed':>15}  "
          f"{'precision':<40} default")  # fmt: skip
    devices = set()
    for tier in found:
        engine = load_engine(settings, tier.name)
        info = engine.backend.info()
        devices.add(f"{info.name} on {info.device}")
        speed = "" if args.no_speed else _speed(engine)
        precision = " ".join(f"{stage}:{p}" for stage, p in info.precision.items())
        mark = "yes" if tier.name == settings.default_tier else ""
        print(f"{tier.name:<10} {tier.kind:<9} {tier.version:<8} "
              f"{tier.size_bytes / 1e6:6.1f} MB  {speed:>15}  {precision:<40} {mark}")  # fmt: skip
    print(f"backend: {', '.join(sorted(devices))}")
    if not args.no_speed:
        print(f"speed: a {SPEED_CLIP_S:g} s {SPEED_SIZE[0]}x{SPEED_SIZE[1]} clip rendered to WAV "
              "on this machine, decode included")  # fmt: skip
    return EXIT_OK


def _speed(engine: Engine) -> str:
    """How much faster than real time `engine` renders a small clip here."""
    import tempfile

    from service.media.clip import write_test_clip

    with tempfile.TemporaryDirectory() as tmp:
        clip = write_test_clip(Path(tmp) / "clip.mp4", SPEED_CLIP_S, SPEED_SIZE)
        started = perf_counter()
        engine.render(clip, Path(tmp) / "out.wav", RenderOptions(format="wav"))
        elapsed = perf_counter() - started
    return f"{SPEED_CLIP_S / elapsed:.1f}x real time"
