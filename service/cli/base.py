"""What every `foley` command shares: exit statuses and the one-line error."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TypeAlias

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
Run = Callable[[argparse.Namespace], int]  # a command, given its parsed arguments
# What each command module adds its parser to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def fail(code: str, reason: str) -> None:
    print(error_line(code, reason), file=sys.stderr)


def error_line(code: str, reason: str) -> str:
    return f"foley: error: {code}: {' '.join(reason.split())}"
