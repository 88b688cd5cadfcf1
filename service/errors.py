"""What went wrong, as one value, and the typed errors that carry it.

A `Problem` (a stable code and a sentence) is the one error value: raised inside a FoleyError,
it is mapped at each edge, by `service.api` to an HTTP status and JSON body, by the preview to
an error message and a close code, by the export queue to the job record's error, by
`service.cli` to a one-line message and an exit status. The pipeline never formats any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

ECHO_CHARS = 64  # of a client's value quoted back in an error


def echo(value: object) -> str:
    """`value` as an error quotes it back to the client: its repr, cut to ECHO_CHARS (a
    megabyte of tier name is not sent back)."""
    text = repr(value)
    return text if len(text) <= ECHO_CHARS else f"{text[: ECHO_CHARS - 3]}..."


@dataclass(frozen=True)
class Problem:
    """`code`: a stable machine-readable string; `reason`: a human sentence."""

    code: str
    reason: str


class FoleyError(Exception):
    """Base error, carrying its Problem; the subclass says what kind (and its HTTP status)."""

    code: str = "internal_error"
    http_status: int = 500

    def __init__(self, reason: str, *, code: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if code is not None:
            self.code = code

    @property
    def problem(self) -> Problem:
        return Problem(self.code, self.reason)

    def __str__(self) -> str:
        return f"{self.code}: {self.reason}"


class InvalidInput(FoleyError):
    """The client sent something we cannot process (bad file, bad parameter)."""

    code = "invalid_input"
    http_status = 422


class MediaError(InvalidInput):
    """The uploaded media cannot be decoded within the limits (codes: see service.media)."""

    code = "invalid_media"
    http_status = 422


class LimitExceeded(InvalidInput):
    """The input is larger than a configured limit (pixels, duration, upload bytes)."""

    code = "limit_exceeded"
    http_status = 413


class ModelConfigError(FoleyError):
    """A tier's files are missing or unreadable: the deployment's fault, not the request's."""

    code = "model_unavailable"
    http_status = 503


class BackendUnavailable(FoleyError):
    """The inference backend asked for cannot start here (no GPU, no TensorRT): the service
    refuses to start rather than run on another one."""

    code = "backend_unavailable"
    http_status = 503


class DeviceOutOfMemory(FoleyError):
    """The GPU ran out of memory for this request; the service goes on with the next."""

    code = "device_out_of_memory"
    http_status = 503


class NotReady(FoleyError):
    code = "not_ready"
    http_status = 503


class Busy(FoleyError):
    """At capacity (renders waiting, export jobs queued): the same request later will do."""

    code = "busy"
    http_status = 503
    headers: ClassVar[dict[str, str]] = {"Retry-After": "5"}


def validation_reason(errors: Iterable[Mapping[str, Any]]) -> str:
    """Pydantic/FastAPI error dicts -> `query.format: Input should be ...; ...`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
