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
    headers: ClassVar[dict[str, str]] = {}  # sent with the HTTP answer

    def __init_subclass__(
        cls, *, code: str = "", status: int = 0, headers: dict[str, str] | None = None
    ) -> None:
        """`class JobNotFound(FoleyError, code="job_not_found", status=404)`: each kind states
        its code, HTTP status and headers in its head; what it leaves out, it inherits."""
        super().__init_subclass__()
        if code:
            cls.code = code
        if status:
            cls.http_status = status
        if headers is not None:
            cls.headers = headers

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


class InvalidInput(FoleyError, code="invalid_input", status=422):
    """The client sent something we cannot process (bad file, bad parameter)."""


class MediaError(InvalidInput, code="invalid_media"):
    """The uploaded media cannot be decoded within the limits (codes: see service.media)."""


class LimitExceeded(InvalidInput, code="limit_exceeded", status=413):
    """The input is larger than a configured limit (pixels, duration, upload bytes)."""


class ModelConfigError(FoleyError, code="model_unavailable", status=503):
    """A tier's files are missing or unreadable: the deployment's fault, not the request's."""


class BackendUnavailable(FoleyError, code="backend_unavailable", status=503):
    """The inference backend asked for cannot start here (no GPU, no TensorRT): the service
    refuses to start rather than run on another one."""


class DeviceOutOfMemory(FoleyError, code="device_out_of_memory", status=503):
    """The GPU ran out of memory for this request; the service goes on with the next."""


class NotReady(FoleyError, code="not_ready", status=503):
    pass


class Busy(FoleyError, code="busy", status=503, headers={"Retry-After": "5"}):
    """At capacity (renders waiting, export jobs queued): the same request later will do."""


def validation_reason(errors: Iterable[Mapping[str, Any]]) -> str:
    """Pydantic/FastAPI error dicts -> `query.format: Input should be ...; ...`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
