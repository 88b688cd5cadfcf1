"""`foley generate`: videos (or folders of them) rendered in one process, the model loaded once,
under one progress bar; what is rendered where: service.cli.plan."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, TextIO

from service.cli.base import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, error_line
from service.cli.plan import FORMATS, Job, plan_batch, staged, write_events
from service.config import Settings
from service.errors import FoleyError, InvalidInput
from service.media.loudness import Levelling
from service.pipeline.loading import load_engine
from service.pipeline.tiers import resolve_tier
from service.pipeline.types import DEFAULT_OPTIONS, SAMPLE_RATES, ProgressFn, RenderOptions

if TYPE_CHECKING:
    from service.pipeline.loading import Engine

logger = logging.getLogger("service.cli")
NAME, HELP = "generate", "render the Foley of videos (files or folders), the model loaded once"
LOG_LEVEL = logging.WARNING
# The engine reports progress as a fraction, not the clip's length, so the bar is shown once a
# render has taken this long: short clips finish before it appears.
PROGRESS_DELAY_S = 2.0


def arguments(generate: argparse.ArgumentParser) -> None:
    generate.add_argument("inputs", type=Path, nargs="+", metavar="INPUT",
                          help="video files, or folders of them")  # fmt: skip
    generate.add_argument(
        "-o", "--output", type=Path,
        help="output file (one input; its extension picks the format) or folder; default: "
        "<input>.foley.<format> beside each input",
    )  # fmt: skip
    generate.add_argument("--format", choices=sorted(FORMATS),
                          help="output format when -o names no file (default wav)")  # fmt: skip
    generate.add_argument("--force", action="store_true", help="overwrite existing outputs")
    generate.add_argument(
        "--sample-rate", type=int, choices=SAMPLE_RATES, default=DEFAULT_OPTIONS.sample_rate
    )
    generate.add_argument("--tier", help="model tier (`foley tiers`; default: the configured one)")
    generate.add_argument(
        "--loudness", type=_loudness, default=DEFAULT_OPTIONS.loudness, metavar="LUFS|off",
        help="integrated loudness of the track, EBU R128, true peak under -1 dBTP "
        f"(default {DEFAULT_OPTIONS.loudness:g}); off: the model's own level",
    )  # fmt: skip
    generate.add_argument(
        "--events", metavar="FILE|FORMAT",
        help="also write the contacts as markers: a .otio (timeline), .json or .csv file, or "
        "one of otio, json, csv for a file beside each output",
    )  # fmt: skip
    generate.add_argument(
        "--replace-audio", action="store_true",
        help="video outputs: the Foley alone (by default the input's own audio is kept, copied, "
        "and the Foley added as one more track)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    jobs = plan_batch(
        args.inputs, output=args.output, fmt=args.format, events=args.events, force=args.force
    )
    settings = Settings()
    tier = resolve_tier(settings, args.tier)
    durations = [probe_input(job.input, settings) for job in jobs]
    engine = load_engine(settings, tier)
    failed: list[Exception] = []
    total = sum(durations)
    with _progress_bar(args.quiet) as progress:
        done = 0.0
        for job, duration in zip(jobs, durations, strict=True):
            share = duration / total

            def each(fraction: float, done: float = done, share: float = share) -> None:
                progress(done + share * fraction)

            try:
                line, warnings = _render_job(engine, job, args, each)
            except FoleyError as exc:
                failed.append(exc)
                progress.say(error_line(exc.code, f"{job.input}: {exc.reason}"), sys.stderr)
            except Exception as exc:  # one file's failure; the others still render
                logger.debug("internal error on %s", job.input, exc_info=True)
                failed.append(exc)
                reason = f"{job.input}: {type(exc).__name__}: {exc}"
                progress.say(error_line("internal_error", reason), sys.stderr)
            else:
                if not args.quiet:
                    progress.say(line, sys.stdout)
                for warning in warnings:  # the file was damaged: say what was done about it
                    progress.say(f"foley: warning: {job.input}: {warning}", sys.stderr)
            done += share
    if not failed:
        return EXIT_OK
    return EXIT_INVALID if all(isinstance(e, InvalidInput) for e in failed) else EXIT_INTERNAL


def _render_job(
    engine: Engine, job: Job, args: argparse.Namespace, progress: ProgressFn
) -> tuple[str, tuple[str, ...]]:
    """One input rendered into its output (and its markers); the summary line, and what was
    wrong with the file and worked around."""
    options = RenderOptions(
        format=job.format,
        sample_rate=args.sample_rate,
        tier=args.tier,
        replace_audio=args.replace_audio,
        loudness=args.loudness,
    )
    started = perf_counter()
    with staged(job.output) as staging:
        result = engine.render(job.input, staging, options, progress=progress)
    if job.events is not None:
        write_events(job, result)
    elapsed = perf_counter() - started
    speed = result.duration_s / elapsed if elapsed > 0 else float("inf")
    events = f", {len(result.markers)} contacts -> {job.events}" if job.events else ""
    line = (
        f"{job.output}: {result.duration_s:.2f} s, {result.frames} frames, "
        f"{result.sample_rate} Hz{_level_note(result.levelling)}, rendered in {elapsed:.2f} s "
        f"({speed:.1f}x real time){events}"
    )
    return line, result.warnings


def probe_input(path: Path, settings: Settings) -> float:
    """The input's declared duration (s, at least a millisecond), after the isolated decoder's
    header checks: a file that is not a video is refused before any model loads."""
    from service.media.decode import DecodeLimits, probe

    try:
        info = probe(path, limits=DecodeLimits.from_settings(settings))
    except FoleyError as exc:
        raise type(exc)(f"{path}: {exc.reason}", code=exc.code) from None
    return max(info.duration_s, 1e-3)


def _loudness(text: str) -> float | None:
    if text.lower() == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a loudness in LUFS or 'off'") from None
    try:
        return RenderOptions(loudness=value).loudness
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def _level_note(levelling: Levelling | None) -> str:
    if levelling is None:
        return ""
    measured = levelling.loudness.integrated_lufs
    level = "silent" if measured is None else f"{measured:.1f} LUFS"
    return f", {level} (gain {levelling.gain_db:+.1f} dB)"


class _Progress:
    """One progress bar on stderr over a whole command; `say` prints a line beside it without
    tearing it (and without showing it before its delay)."""

    def __init__(self, quiet: bool) -> None:
        from tqdm import tqdm

        self.started = perf_counter()
        self.bar = tqdm(
            total=1.0,
            file=sys.stderr,
            delay=PROGRESS_DELAY_S,
            leave=False,
            bar_format="{l_bar}{bar}| [{elapsed}<{remaining}]",
            disable=quiet,
        )

    def __call__(self, fraction: float) -> None:
        self.bar.update(min(max(fraction, 0.0), 1.0) - self.bar.n)

    def say(self, line: str, to: TextIO) -> None:
        if perf_counter() - self.started < PROGRESS_DELAY_S:  # not shown yet
            print(line, file=to)
        else:
            self.bar.write(line, file=to)


@contextmanager
def _progress_bar(quiet: bool = False) -> Iterator[_Progress]:
    progress = _Progress(quiet)
    try:
        yield progress
    finally:
        progress.bar.close()
