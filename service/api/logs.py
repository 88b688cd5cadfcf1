"""No API key in a log line. Keys travel in headers and in the live preview's config message,
which nothing logs; a key someone puts in a URL would still reach uvicorn's access and
WebSocket lines, so every handler of the server's logs passes records through `RedactKeys`:
an `api_key=` query value and any configured key's text become `[redacted]`."""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Sequence
from typing import Any

REDACTED = "[redacted]"
_QUERY_KEY = re.compile(r"(api_key=)[^&\s\"']+", re.IGNORECASE)


class RedactKeys(logging.Filter):
    def __init__(self, keys: Sequence[str] = ()) -> None:
        super().__init__()
        self.keys = [k for k in keys if k]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = _QUERY_KEY.sub(r"\1" + REDACTED, message)
        for key in self.keys:
            clean = clean.replace(key, REDACTED)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def server_log_config(keys: Sequence[str]) -> dict[str, Any]:
    """uvicorn's own logging configuration, with every handler redacting keys."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redact": {"()": RedactKeys, "keys": list(keys)}}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact")
    return config


def redact_root_handlers(keys: Sequence[str]) -> None:
    """The same for the handlers of the root logger (the service's own loggers)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactKeys(keys))
