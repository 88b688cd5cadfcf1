"""Routes do HTTP only: each reads the request and writes the answer, and the work is done by
functions it calls, so no route grows past a screen."""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "service" / "api"
MAX_ROUTE_LINES = 40


def test_no_route_is_longer_than_a_screen() -> None:
    long = []
    for path in sorted(API.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if any("router." in ast.unparse(d) for d in node.decorator_list):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_ROUTE_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []
