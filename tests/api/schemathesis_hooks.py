"""Schemathesis hooks for tests/api/test_schema.py: what a schema cannot say.

- An upload's `file` is a real short video (the file named by FOLEY_SCHEMA_CLIP): a request the
  schema allows must then render. Random bytes are refused for what they hold (422
  `not_a_video`), which no schema describes.
- A well-formed Idempotency-Key is made unique per request: a key stands for one request, and
  reusing it for another is refused (422 `idempotency_key_reused`, as the IETF draft has it).
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.format("binary", st.just(Path(os.environ["FOLEY_SCHEMA_CLIP"]).read_bytes()))
_KEY = re.compile(r"[\x21-\x7e]{1,255}")


@schemathesis.hook
def before_call(ctx: schemathesis.HookContext, case: schemathesis.Case, **kwargs) -> None:
    # At the call, not at generation: every phase's cases pass here, generated or not.
    for name, value in (case.headers or {}).items():
        if name.lower() == "idempotency-key" and _KEY.fullmatch(str(value)):
            case.headers[name] = uuid.uuid4().hex  # still valid; this request's own
