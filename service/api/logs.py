"""No API key in a log line. Keys travel in headers and in the live preview's config message,
which nothing logs; a key someone puts in a URL would still reach uvicorn's access and
WebSocket lines, so every handler of the server's logs passes records through `RedactKeys`:
an `api_key=` query value and any configured key's text become `[redacted]`."""

from __future__ import annotations

import copy
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from service.context import REQUEST_ID

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


def server_log_config(keys: Sequence[str], fmt: str = "text") -> dict[str, Any]:
    """uvicorn's own logging configuration, with every handler redacting keys and naming the
    request; `fmt` "json": one JSON object a line, as the service's own logs."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {
        "redact": {"()": RedactKeys, "keys": list(keys)},
        "request_id": {"()": RequestIdFilter},
    }
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).extend(["redact", "request_id"])
    if fmt == "json":
        for name in config["formatters"]:
            config["formatters"][name] = {"()": json_formatter}
    return config


def configure_root(keys: Sequence[str], fmt: str = "text") -> None:
    """The same for the handlers of the root logger (the service's own loggers)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactKeys(keys))
        handler.addFilter(RequestIdFilter())
        if fmt == "json":
            handler.setFormatter(json_formatter())


_VALID_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestIdFilter(logging.Filter):
    """Gives every record the id of the request (or job, or live session) it was made in."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


class RequestIds:
    """ASGI middleware: each HTTP request and WebSocket session has an id, the client's
    `X-Request-ID` when it is a sane token, else a new one. It is in the response's
    `X-Request-ID` header and in every log line made while the request is served (uvicorn's
    access line included: it is written from inside `send`)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _VALID_ID.fullmatch(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        scope["request_id"] = request_id  # for the error page the server's middleware writes

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


_JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s"


def json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(_JSON_FIELDS, rename_fields={"asctime": "time", "levelname": "level"})
