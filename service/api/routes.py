"""Routes: health probes and `POST /v1/foley` (upload a video, get the rendered file back).

Each request owns a fresh directory under `settings.work_dir` holding the upload and the render;
it is removed after the response is sent, and on every error path.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from time import perf_counter
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.types import Receive, Scope, Send

from service.api.errors import validation_reason
from service.api.schemas import MEDIA_TYPES, ErrorResponse, FoleyParams, Health, Ready
from service.api.state import Engine, ServiceState, get_state
from service.api.uploads import FILE_FIELD, receive_upload
from service.errors import InvalidInput
from service.pipeline.types import RenderOptions, RenderResult

logger = logging.getLogger(__name__)
router = APIRouter()
State = Annotated[ServiceState, Depends(get_state)]

_ERRORS = {
    400: "Malformed multipart body",
    413: "Upload or input over a configured limit",
    415: "Not multipart/form-data",
    422: "Invalid parameter or undecodable media",
    503: "Model not loaded yet, or too many renders waiting",
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_FOLEY_RESPONSES: dict[int | str, dict] = {
    200: {
        "description": "The rendered file (Server-Timing: per-stage milliseconds)",
        "content": {media_type: _BINARY for media_type in MEDIA_TYPES.values()},
    },
    **{status: {"model": ErrorResponse, "description": text} for status, text in _ERRORS.items()},
}
# The body is streamed by hand (service.api.uploads), so FastAPI cannot derive its schema.
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": [FILE_FIELD],
                    "properties": {
                        FILE_FIELD: _BINARY["schema"],
                        **FoleyParams.model_json_schema()["properties"],
                    },
                }
            }
        },
    }
}
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
# The upload's name on disk. No extension, and never the client's: FFmpeg picks demuxers partly
# by extension, and its HLS demuxer (which follows playlist URLs) refuses files not named .m3u8.
UPLOAD_NAME = "upload"


@router.get("/healthz", responses={503: {"model": ErrorResponse}})
async def healthz(state: State) -> Health:
    """Liveness: 200 while the process serves, 503 if the model failed to load."""
    state.check_alive()
    return Health()


@router.get("/readyz", responses={503: {"model": ErrorResponse}})
async def readyz(state: State) -> Ready:
    """Readiness: 503 until the model is loaded and warmed up."""
    engine = state.ready_engine()
    return Ready(tier=engine.tier.name, model_version=engine.tier.version)


@router.post(
    "/v1/foley",
    response_class=FileResponse,
    responses=_FOLEY_RESPONSES,
    openapi_extra=_UPLOAD_BODY,
)
async def foley(request: Request, state: State, query: Annotated[FoleyParams, Query()]):
    """Upload a video (multipart field `file`); get its Foley track, or the video with it.

    `format` and `sample_rate` may come as query parameters or as form fields.
    """
    started = perf_counter()
    engine = state.ready_engine()
    state.check_capacity()
    workdir = Path(tempfile.mkdtemp(prefix="foley-", dir=state.settings.work_dir))
    try:
        upload = await receive_upload(
            request, workdir / UPLOAD_NAME, max_bytes=state.settings.max_upload_bytes
        )
        uploaded = perf_counter()
        params = _merge_params(query, upload.fields)
        options = RenderOptions(format=params.format, sample_rate=params.sample_rate)
        result, queued, rendered = await _render(state, engine, upload.path, workdir, options)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    stages = {name: s for name, s in result.timings.items() if name != "total"}
    timings = {"upload": uploaded - started, "queue": queued, **stages, "render": rendered}
    timings["total"] = perf_counter() - started
    logger.info(
        "rendered %s: %.2f s of video, %d frames, %.2f s total",
        result.format, result.duration_s, result.frames, timings["total"],
    )  # fmt: skip
    return TempFileResponse(
        result.output,
        workdir,
        media_type=MEDIA_TYPES[result.format],
        filename=download_name(upload.filename, result.format),
        headers={
            "Server-Timing": server_timing(timings),
            "X-Foley-Tier": result.tier,
            "X-Foley-Model-Version": result.model_version,
            "X-Foley-Duration": f"{result.duration_s:.3f}",
        },
    )


async def _render(
    state: ServiceState, engine: Engine, input_path: Path, workdir: Path, options: RenderOptions
) -> tuple[RenderResult, float, float]:
    """The blocking render in a worker thread behind the limiter -> (result, wait s, render s)."""
    state.check_capacity()
    output = workdir / f"foley.{options.format}"
    waiting_since = perf_counter()
    started_at: list[float] = []

    def run() -> RenderResult:
        started_at.append(perf_counter())
        return engine.render(input_path, output, options)

    result = await anyio.to_thread.run_sync(run, limiter=state.limiter)
    return result, started_at[0] - waiting_since, perf_counter() - started_at[0]


def _merge_params(query: FoleyParams, fields: Mapping[str, str]) -> FoleyParams:
    """Query parameters and form fields together; the same name given both ways must agree."""
    given = query.model_dump(include=query.model_fields_set)
    for name, value in fields.items():
        if name in given and str(given[name]) != value:
            raise InvalidInput(
                f"{name} is {given[name]!r} in the query but {value!r} in the form",
                code="invalid_parameter",
            )
    try:
        return FoleyParams.model_validate({**given, **fields})
    except ValidationError as exc:
        errors = [{**e, "loc": ("form", *e["loc"])} for e in exc.errors()]
        raise InvalidInput(validation_reason(errors), code="invalid_parameter") from exc


def server_timing(seconds: Mapping[str, float]) -> str:
    """`{"decode": 0.0123, ...}` -> `decode;dur=12.3, ...` (Server-Timing wants milliseconds)."""
    return ", ".join(
        f"{_UNSAFE_NAME.sub('_', name)};dur={1000 * value:.1f}" for name, value in seconds.items()
    )


def download_name(filename: str | None, fmt: str) -> str:
    """`holiday clip.mov` -> `holiday_clip.foley.wav`; only safe characters reach the header."""
    stem = _UNSAFE_NAME.sub("_", Path(filename or "").stem).strip("._")[:100]
    return f"{stem or 'clip'}.foley.{fmt}"


class TempFileResponse(FileResponse):
    """A FileResponse that removes the request's work dir once sent.

    Starlette runs `background` only after a successful send; a client that disconnects
    mid-download would otherwise leave the directory behind.
    """

    def __init__(self, path: Path, workdir: Path, **kwargs) -> None:
        cleanup = BackgroundTask(shutil.rmtree, workdir, ignore_errors=True)
        super().__init__(path, background=cleanup, **kwargs)
        self.workdir = workdir

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
