"""`foley` command line: render one file offline (`generate`), run the HTTP API (`serve`), stream
to a running service (`preview`) or run a Celery export worker (`worker`).

Exit status: 0 on success, 2 for invalid input (bad file, bad argument), 1 for anything else;
every failure prints one line `foley: error: <code>: <reason>` to stderr and no traceback
(`-v` logs it).
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, TextIO, get_args

from service.config import Settings
from service.errors import FoleyError, InvalidInput, ModelConfigError
from service.generate import FORMATS, Job, plan_batch, staged, write_events
from service.media.loudness import Levelling
from service.pipeline.backends.base import BackendName
from service.pipeline.loading import load_engine
from service.pipeline.tiers import listed_tiers, resolve_tier
from service.pipeline.types import DEFAULT_OPTIONS, SAMPLE_RATES, ProgressFn, RenderOptions

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from service.pipeline.loading import Engine

logger = logging.getLogger("service.cli")

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
# The engine reports progress as a fraction, not the clip's length, so the bar is shown once a
# render has taken this long: short clips finish before it appears.
PROGRESS_DELAY_S = 2.0
# Without it, open WebSockets keep the process alive forever after SIGTERM.
GRACEFUL_SHUTDOWN_S = 30
WS_PING_S = 20.0
SPEED_CLIP_S, SPEED_SIZE = 4.0, (640, 360)  # what `foley tiers` times each tier on
LOG_LEVELS = {
    "generate": logging.WARNING,
    "tiers": logging.WARNING,
    "serve": logging.INFO,
    "preview": logging.WARNING,
    "worker": logging.INFO,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    if args.backend is not None:  # as FOLEY_BACKEND: every Settings of this run, workers' too
        os.environ["FOLEY_BACKEND"] = args.backend
    quiet = logging.ERROR if args.quiet else LOG_LEVELS[args.command]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else quiet,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.run(args)
    except FoleyError as exc:
        _fail(exc.code, exc.reason)
        return EXIT_INVALID if isinstance(exc, InvalidInput) else EXIT_INTERNAL
    except KeyboardInterrupt:
        _fail("interrupted", "stopped by the user")
        return 130
    except Exception as exc:  # the CLI boundary: one line, the traceback only with -v
        logger.debug("internal error", exc_info=True)
        _fail("internal_error", f"{type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


def _parser() -> argparse.ArgumentParser:
    # -v/-q are taken before or after the command: on the main parser and on each command,
    # where SUPPRESS keeps a command's absent flag from overwriting the main parser's.
    common = argparse.ArgumentParser(add_help=False)
    loud = common.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                      help="debug logging")  # fmt: skip
    loud.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                      help="errors only: no progress bar, no summary")  # fmt: skip
    common.add_argument("--backend", choices=get_args(BackendName), default=argparse.SUPPRESS,
                        help="what runs the models (default: FOLEY_BACKEND or cpu; auto: the "
                        "fastest present)")  # fmt: skip
    parser = argparse.ArgumentParser(
        prog="foley", description="Video in, Foley audio out.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"foley {_version()}")
    parser.set_defaults(verbose=False, quiet=False, backend=None)
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser(
        "generate", parents=[common],
        help="render the Foley of videos (files or folders), the model loaded once",
    )  # fmt: skip
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
    generate.set_defaults(run=_generate)

    tiers = commands.add_parser("tiers", parents=[common], help="list the model tiers")
    tiers.add_argument("--no-speed", action="store_true", help="skip timing each tier")
    tiers.set_defaults(run=_tiers)

    serve = commands.add_parser("serve", parents=[common], help="run the HTTP API")
    serve.add_argument("--host", help="bind address (default: FOLEY_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: FOLEY_PORT or 8000)")
    serve.set_defaults(run=_serve)

    preview = commands.add_parser(
        "preview", parents=[common],
        help="stream a video file to a running service's live preview, in real time",
    )  # fmt: skip
    preview.add_argument("input", type=Path, help="video file")
    preview.add_argument("--url", default="ws://127.0.0.1:8000/v1/preview")
    preview.add_argument(
        "--size", default="320x180", help="frames sent fit in WxH, shape kept (default 320x180)"
    )
    preview.add_argument("--jpeg", action="store_true", help="send JPEG frames, not raw RGB")
    preview.add_argument(
        "--sample-rate", type=int, choices=SAMPLE_RATES, default=DEFAULT_OPTIONS.sample_rate
    )
    preview.add_argument("--speed", type=float, default=1.0, help="1 = real time, 0 = flat out")
    preview.add_argument("--api-key", help="when the service requires one")
    preview.add_argument("-o", "--output", type=Path, help="also write the Foley to this WAV")
    preview.set_defaults(run=_preview)

    worker = commands.add_parser(
        "worker", parents=[common],
        help="run a Celery worker for export jobs (needs FOLEY_BROKER_URL)",
    )  # fmt: skip
    worker.add_argument(
        "--concurrency", type=int, help="render processes (default: FOLEY_EXPORT_WORKERS)"
    )
    worker.set_defaults(run=_worker)
    return parser


def _generate(args: argparse.Namespace) -> int:
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
                progress.say(_error_line(exc.code, f"{job.input}: {exc.reason}"), sys.stderr)
            except Exception as exc:  # one file's failure; the others still render
                logger.debug("internal error on %s", job.input, exc_info=True)
                failed.append(exc)
                reason = f"{job.input}: {type(exc).__name__}: {exc}"
                progress.say(_error_line("internal_error", reason), sys.stderr)
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


def _preview(args: argparse.Namespace) -> int:
    import asyncio

    from service.preview.client import ClientOptions, stream_file

    if not args.input.is_file():
        raise InvalidInput(f"{args.input}: no such file", code="input_not_found")
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise InvalidInput(f"--size {args.size!r}: expected WxH", code="invalid_size") from None
    options = ClientOptions(
        width=width,
        height=height,
        jpeg=args.jpeg,
        sample_rate=args.sample_rate,
        speed=args.speed,
        api_key=args.api_key,
    )
    from websockets.exceptions import InvalidStatus

    try:
        report = asyncio.run(stream_file(args.input, args.url, options))
    except InvalidStatus as exc:
        status = exc.response.status_code
        raise PreviewRefused(
            f"{args.url} refused the session (HTTP {status}): check the API key and the origin"
        ) from None
    except OSError as exc:
        raise ServiceUnreachable(f"{args.url}: {exc}") from None
    if report.error is not None:
        raise PreviewRefused(f"{report.error['reason']}", code=report.error["code"])
    for key, value in report.summary().items():
        print(f"{key:>22}: {value}")
    if args.output is not None:
        import numpy as np

        from service.media.audio_out import AudioWriter

        with AudioWriter(
            args.output, "wav", in_rate=args.sample_rate, out_rate=args.sample_rate
        ) as w:
            w.write(report.samples.astype(np.float32))
    return EXIT_OK


class ServiceUnreachable(FoleyError):
    code = "service_unreachable"


class PreviewRefused(FoleyError):
    code = "preview_refused"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api import create_app
    from service.api.logs import configure_root

    overrides = {"host": args.host, "port": args.port}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    configure_root(settings.api_keys, settings.log_format)
    uvicorn.Server(uvicorn_config(create_app(settings), settings)).run()
    return EXIT_OK


def _worker(args: argparse.Namespace) -> int:
    settings = Settings()
    if settings.broker_url is None:
        raise InvalidInput("FOLEY_BROKER_URL is not set", code="no_broker")
    # SIGTERM (a deploy, a scale-down) as Celery's cold shutdown: renders get a grace period,
    # then go back to the queue. Read when billiard is imported, so set before it is.
    os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    if settings.worker_metrics_port:
        serve_worker_metrics(settings.worker_metrics_port)
    from service.jobs.celery_app import QUEUE, create_celery

    concurrency = args.concurrency or settings.export_workers
    level = "DEBUG" if args.verbose else "INFO"
    create_celery(settings).worker_main(
        [
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            f"--loglevel={level}",
            f"--queues={QUEUE}",
            f"--hostname=foley-{os.getpid()}@%h",  # several workers may share a host
            "--without-mingle",
            "--without-gossip",
        ]
    )
    return EXIT_OK


def serve_worker_metrics(port: int) -> None:
    """Serve the job metrics of this worker's children (each its own process) on `port`:
    prometheus_client's multiprocess mode, each child writing to files in one directory that
    this process reads at each scrape. The directory must be named before prometheus_client is
    first imported, and start empty."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before its multiprocess directory")
    directory = tempfile.mkdtemp(prefix="foley-worker-metrics-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
    logger.info("worker metrics on :%d/metrics", port)


def uvicorn_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    import uvicorn

    from service.api.logs import server_log_config
    from service.api.protocol import head_deadline_protocol

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=head_deadline_protocol(settings.request_head_timeout_s),
        log_config=server_log_config(settings.api_keys, settings.log_format),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        limit_concurrency=settings.max_connections,
        # uvicorn's default is 16 MiB: the largest frame a preview session may send is enough.
        ws_max_size=settings.preview_max_frame_pixels * 3 + 64,
        ws_ping_interval=WS_PING_S,
        ws_ping_timeout=WS_PING_S,
        # Compression costs CPU per message and invites decompression bombs; frames are
        # already compressed media.
        ws_per_message_deflate=False,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("foley")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _tiers(args: argparse.Namespace) -> int:
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


def _fail(code: str, reason: str) -> None:
    print(_error_line(code, reason), file=sys.stderr)


def _error_line(code: str, reason: str) -> str:
    return f"foley: error: {code}: {' '.join(reason.split())}"


if __name__ == "__main__":
    sys.exit(main())
