"""`foley` command line: render one file offline (`generate`), run the HTTP API (`serve`), stream
to a running service (`preview`) or run a Celery export worker (`worker`).

Exit status: 0 on success, 2 for invalid input (bad file, bad argument), 1 for anything else;
every failure prints one line `foley: error: <code>: <reason>` to stderr and no traceback
(`-v` logs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, cast

from service.config import Settings
from service.errors import FoleyError, InvalidInput
from service.markers import marker_format, markers_document, write_markers
from service.pipeline.types import (
    AUDIO_FORMATS,
    DEFAULT_TARGET_LUFS,
    MAX_LUFS,
    MIN_LUFS,
    SAMPLE_RATES,
    VIDEO_FORMATS,
    Levelling,
    OutputFormat,
    ProgressFn,
    RenderOptions,
    RenderResult,
)

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from service.api.state import Engine

logger = logging.getLogger("service.cli")

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
FORMATS = AUDIO_FORMATS | VIDEO_FORMATS
# The engine reports progress as a fraction, not the clip's length, so the bar is shown once a
# render has taken this long: short clips finish before it appears.
PROGRESS_DELAY_S = 2.0
# Without it, open WebSockets keep the process alive forever after SIGTERM.
GRACEFUL_SHUTDOWN_S = 30
WS_PING_S = 20.0
LOG_LEVELS = {
    "generate": logging.WARNING,
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
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else LOG_LEVELS[args.command],
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
    parser = argparse.ArgumentParser(prog="foley", description="Video in, Foley audio out.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="render the Foley track of one video file")
    generate.add_argument("input", type=Path, help="video file")
    generate.add_argument(
        "-o", "--output", type=Path, required=True,
        help=f"output file; its extension picks the format ({', '.join(sorted(FORMATS))})",
    )  # fmt: skip
    generate.add_argument("--sample-rate", type=int, choices=SAMPLE_RATES, default=48000)
    generate.add_argument("--tier", help="model tier (default: the configured default tier)")
    generate.add_argument(
        "--loudness", type=_loudness, default=DEFAULT_TARGET_LUFS, metavar="LUFS|off",
        help="integrated loudness of the track, EBU R128, true peak under -1 dBTP "
        f"(default {DEFAULT_TARGET_LUFS:g}); off: the model's own level",
    )  # fmt: skip
    generate.add_argument(
        "--events", type=Path, metavar="FILE",
        help="also write the contacts as markers: .otio (a timeline), .json or .csv",
    )  # fmt: skip
    generate.add_argument(
        "--replace-audio", action="store_true",
        help="video outputs: the Foley alone (by default the input's own audio is kept, copied, "
        "and the Foley added as one more track)",
    )  # fmt: skip
    generate.set_defaults(run=_generate)

    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", help="bind address (default: FOLEY_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: FOLEY_PORT or 8000)")
    serve.set_defaults(run=_serve)

    preview = commands.add_parser(
        "preview", help="stream a video file to a running service's live preview, in real time"
    )
    preview.add_argument("input", type=Path, help="video file")
    preview.add_argument("--url", default="ws://127.0.0.1:8000/v1/preview")
    preview.add_argument("--size", default="96x96", help="frame size sent, WxH (default 96x96)")
    preview.add_argument("--jpeg", action="store_true", help="send JPEG frames, not raw RGB")
    preview.add_argument("--sample-rate", type=int, choices=SAMPLE_RATES, default=48000)
    preview.add_argument("--speed", type=float, default=1.0, help="1 = real time, 0 = flat out")
    preview.add_argument("--api-key", help="when the service requires one")
    preview.add_argument("-o", "--output", type=Path, help="also write the Foley to this WAV")
    preview.set_defaults(run=_preview)

    worker = commands.add_parser(
        "worker", help="run a Celery worker for export jobs (needs FOLEY_BROKER_URL)"
    )
    worker.add_argument(
        "--concurrency", type=int, help="render processes (default: FOLEY_EXPORT_WORKERS)"
    )
    worker.set_defaults(run=_worker)
    return parser


def _generate(args: argparse.Namespace) -> int:
    output_format = output_format_of(args.output)
    if args.events is not None:
        marker_format(args.events)
    if not args.input.is_file():
        raise InvalidInput(f"{args.input}: no such file", code="input_not_found")
    if not args.output.parent.is_dir():
        raise InvalidInput(f"{args.output.parent}: no such directory", code="output_dir_not_found")
    settings = Settings() if args.tier is None else Settings(default_tier=args.tier)
    if args.tier is not None and not (settings.models_dir / args.tier).is_dir():
        raise InvalidInput(f"no tier {args.tier!r} in {settings.models_dir}", code="unknown_tier")
    options = RenderOptions(
        format=output_format,
        sample_rate=args.sample_rate,
        tier=args.tier,
        replace_audio=args.replace_audio,
        loudness_lufs=args.loudness,
    )
    engine = load_engine(settings)
    started = perf_counter()
    with _staged(args.output) as staging, _progress_bar() as progress:
        result = engine.render(args.input, staging, options, progress=progress)
    if args.events is not None:
        _write_events(args.events, args.input, args.output, result)
    elapsed = perf_counter() - started
    speed = result.duration_s / elapsed if elapsed > 0 else float("inf")
    print(
        f"{args.output}: {result.duration_s:.2f} s, {result.frames} frames, "
        f"{result.sample_rate} Hz{_level_note(result.levelling)}, rendered in {elapsed:.2f} s "
        f"({speed:.1f}x real time)"
    )
    return EXIT_OK


def _write_events(path: Path, video: Path, audio: Path, result: RenderResult) -> None:
    """The render's contacts beside it, naming the video and the track relative to the file."""

    def relative(p: Path) -> str:
        return os.path.relpath(p.resolve(), path.resolve().parent)

    document = markers_document(result, video_name=relative(video), audio_name=relative(audio))
    with _staged(path) as staging:
        write_markers(staging, document)


def _loudness(text: str) -> float | None:
    if text.lower() == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a loudness in LUFS or 'off'") from None
    if not MIN_LUFS <= value <= MAX_LUFS:
        raise argparse.ArgumentTypeError(f"{text} LUFS is outside {MIN_LUFS:g}..{MAX_LUFS:g}")
    return value


def _level_note(levelling: Levelling | None) -> str:
    if levelling is None:
        return ""
    measured = levelling.loudness.integrated_lufs
    level = "silent" if measured is None else f"{measured:.1f} LUFS"
    return f", {level} (gain {levelling.gain_db:+.1f} dB)"


def output_format_of(path: Path) -> OutputFormat:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        known = ", ".join(f".{f}" for f in sorted(FORMATS))
        raise InvalidInput(
            f"{path}: unknown output extension {path.suffix!r} (use {known})",
            code="unsupported_format",
        )
    return cast(OutputFormat, suffix)


def load_engine(settings: Settings) -> Engine:
    # Imported here so that `foley --help` and argument errors need no ONNX Runtime.
    from service.pipeline.engine import FoleyEngine

    return FoleyEngine.load(settings)


@contextmanager
def _staged(output: Path) -> Iterator[Path]:
    """Render beside `output` and rename into place: a failed render leaves no partial file."""
    # Not mkstemp: its 0600 mode would survive the rename.
    staging = output.with_name(f".{output.stem}.{secrets.token_hex(4)}.partial{output.suffix}")
    try:
        yield staging
        os.replace(staging, output)
    finally:
        staging.unlink(missing_ok=True)


@contextmanager
def _progress_bar() -> Iterator[ProgressFn]:
    from tqdm import tqdm

    bar_format = "{l_bar}{bar}| [{elapsed}<{remaining}]"
    with tqdm(
        total=1.0, file=sys.stderr, delay=PROGRESS_DELAY_S, leave=False, bar_format=bar_format
    ) as bar:

        def progress(fraction: float) -> None:
            bar.update(min(max(fraction, 0.0), 1.0) - bar.n)

        yield progress


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

    overrides = {"host": args.host, "port": args.port}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    uvicorn.Server(uvicorn_config(create_app(settings), settings)).run()
    return EXIT_OK


def _worker(args: argparse.Namespace) -> int:
    settings = Settings()
    if settings.broker_url is None:
        raise InvalidInput("FOLEY_BROKER_URL is not set", code="no_broker")
    # SIGTERM (a deploy, a scale-down) as Celery's cold shutdown: renders get a grace period,
    # then go back to the queue. Read when billiard is imported, so set before it is.
    os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
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


def uvicorn_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        # uvicorn's default is 16 MiB: the largest frame a preview session may send is enough.
        ws_max_size=settings.preview_max_frame_pixels * 3 + 64,
        ws_ping_interval=WS_PING_S,
        ws_ping_timeout=WS_PING_S,
        # Compression costs CPU per message and invites decompression bombs; frames are
        # already compressed media.
        ws_per_message_deflate=False,
    )


def _fail(code: str, reason: str) -> None:
    print(f"foley: error: {code}: {' '.join(reason.split())}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
