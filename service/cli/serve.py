"""`foley serve`: the HTTP API (service.api.server)."""

from __future__ import annotations

import argparse
import logging

from service.cli.base import EXIT_OK
from service.config import Settings

NAME, HELP = "serve", "run the HTTP API"
LOG_LEVEL = logging.INFO


def arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", help="bind address (default: FOLEY_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: FOLEY_PORT or 8000)")


def run(args: argparse.Namespace) -> int:
    from service.api.server import serve

    overrides = {"host": args.host, "port": args.port}
    serve(Settings(**{k: v for k, v in overrides.items() if v is not None}))
    return EXIT_OK
