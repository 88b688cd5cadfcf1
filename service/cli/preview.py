"""`foley preview`: a video file streamed to a running service's live preview, in real time."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from service.cli.base import EXIT_OK
from service.errors import FoleyError, InvalidInput
from service.pipeline.types import DEFAULT_OPTIONS, SAMPLE_RATES

NAME, HELP = "preview", "stream a video file to a running service's live preview, in real time"
LOG_LEVEL = logging.WARNING


def arguments(preview: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
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


class ServiceUnreachable(FoleyError, code="service_unreachable"):
    pass


class PreviewRefused(FoleyError, code="preview_refused"):
    pass
