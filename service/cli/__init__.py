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
from collections.abc import Sequence
from typing import get_args

from service.cli import generate, preview, serve, tiers, worker
from service.cli.base import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, Command, fail
from service.errors import FoleyError, InvalidInput
from service.pipeline.backends.base import BackendName

__all__ = ["EXIT_INTERNAL", "EXIT_INVALID", "EXIT_OK", "main"]
logger = logging.getLogger("service.cli")
# In the order `foley --help` lists them.
COMMANDS: tuple[Command, ...] = (generate, tiers, serve, preview, worker)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    if args.backend is not None:  # as FOLEY_BACKEND: every Settings of this run, workers' too
        os.environ["FOLEY_BACKEND"] = args.backend
    command: Command = args.command_module
    quiet = logging.ERROR if args.quiet else command.LOG_LEVEL
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else quiet,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return command.run(args)
    except FoleyError as exc:
        fail(exc.code, exc.reason)
        return EXIT_INVALID if isinstance(exc, InvalidInput) else EXIT_INTERNAL
    except KeyboardInterrupt:
        fail("interrupted", "stopped by the user")
        return 130
    except Exception as exc:  # the CLI boundary: one line, the traceback only with -v
        logger.debug("internal error", exc_info=True)
        fail("internal_error", f"{type(exc).__name__}: {exc}")
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

    for command in COMMANDS:
        sub = commands.add_parser(command.NAME, parents=[common], help=command.HELP)
        command.arguments(sub)
        sub.set_defaults(command_module=command)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("foley")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
