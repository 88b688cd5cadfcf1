"""What every `foley` command shares: exit statuses and the one-line error."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
Commands = argparse._SubParsersAction  # what each command module adds its parser to


def fail(code: str, reason: str) -> None:
    print(error_line(code, reason), file=sys.stderr)


def error_line(code: str, reason: str) -> str:
    return f"foley: error: {code}: {' '.join(reason.split())}"
