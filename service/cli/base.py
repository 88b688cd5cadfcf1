"""What every `foley` command shares: exit statuses and the one-line error."""

from __future__ import annotations

import argparse
import sys
from typing import Protocol

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2


class Command(Protocol):
    """A command's module: `foley NAME` (HELP in `foley --help`) logs at LOG_LEVEL unless -v or
    -q say otherwise."""

    NAME: str
    HELP: str
    LOG_LEVEL: int

    def arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int:
        """The exit status; a FoleyError raised becomes the one-line error."""
        ...


def fail(code: str, reason: str) -> None:
    print(error_line(code, reason), file=sys.stderr)


def error_line(code: str, reason: str) -> str:
    return f"foley: error: {code}: {' '.join(reason.split())}"
