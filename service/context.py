"""What a log line is made within: the request, export job or live session's id (set by
service.api.logs.RequestIds, by the export runner for its job), read by the log filter."""

from __future__ import annotations

from contextvars import ContextVar

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="-")
