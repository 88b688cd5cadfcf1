"""HTTP-only errors and the handlers that give every error response one JSON shape.

`{"error": {"code": ..., "reason": ...}}` for a FoleyError (its own status), a request validation
error (422), an HTTP error from routing (404, 405) and an unexpected exception (500).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api.schemas import error_content
from service.errors import Busy, FoleyError, InvalidInput, LimitExceeded, Problem, validation_reason

logger = logging.getLogger(__name__)


# Refused with the body unread: the connection closes rather than be left with it.
CLOSE = {"Connection": "close"}


class UploadTooLarge(LimitExceeded, code="upload_too_large", headers=CLOSE):
    pass


class UploadsBusy(Busy, headers={"Retry-After": "5", **CLOSE}):
    """Every upload slot is taken: refused before the body is read."""


class UploadTimeout(InvalidInput, code="upload_timeout", status=408, headers=CLOSE):
    pass


class UnsupportedContentType(InvalidInput, code="unsupported_content_type", status=415):
    pass


class BadMultipart(InvalidInput, code="invalid_multipart", status=400):
    pass


class ClientDisconnected(InvalidInput, code="client_disconnected", status=499):
    """The client went away before its answer (nginx's 499: nobody reads it, but the access
    log and the metrics say what became of the request)."""


class EngineUnavailable(FoleyError, code="engine_unavailable", status=503):
    """The engine failed to load: this process will never be ready."""


def error_response(
    status: int, problem: Problem, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_content(problem), status_code=status, headers=headers)


def _count(request: Request, code: str) -> None:
    state = getattr(request.app.state, "foley", None)
    if state is not None:
        state.metrics.errors.labels(code).inc()


async def _foley_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FoleyError)
    _count(request, exc.code)
    if exc.http_status == 500:  # 503s (loading, busy) are expected states, not news
        logger.warning("%s %s -> %s", request.method, request.url.path, exc)
    elif exc.http_status == 499:  # no response reaches the access log: this line stands for it
        logger.info("%s %s -> 499 %s", request.method, request.url.path, exc.reason)
    return error_response(exc.http_status, exc.problem, exc.headers or None)


async def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    _count(request, "invalid_parameter")
    return error_response(422, Problem("invalid_parameter", validation_reason(exc.errors())))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_").replace("-", "_")
    _count(request, code)
    headers = exc.headers
    if exc.status_code == 405:
        # The router names the methods of the first route on this path; several routes may
        # share it (GET and DELETE /v1/exports/{job_id}).
        headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
    return error_response(exc.status_code, Problem(code, str(exc.detail)), headers)


def _allowed(request: Request) -> list[str]:
    """The methods the API's schema gives this path (HEAD with GET, as Starlette answers)."""
    methods: set[str] = set()
    for template, item in request.app.openapi()["paths"].items():
        if re.fullmatch(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)), request.url.path):
            methods |= {m.upper() for m in item}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette re-raises the exception after this response is sent, so the server logs its
    # traceback; this line ties it to the request. The reason stays generic: internals are not
    # the client's business.
    logger.error("%s %s -> unhandled %s", request.method, request.url.path, type(exc).__name__)
    _count(request, "internal_error")
    # Written outside the request-id middleware (Starlette's outermost one): the id from scope.
    request_id = request.scope.get("request_id")
    headers = {"x-request-id": request_id} if request_id else None
    problem = Problem("internal_error", "internal error; see the server log")
    return error_response(500, problem, headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(FoleyError, _foley_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
