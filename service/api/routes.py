"""Routes: `GET /v1/tiers` and `POST /v1/foley` (upload a video, get the rendered file back).

Each request owns a fresh directory under `settings.work_dir` holding the upload and the render;
it is removed after the response is sent, and on every error path.

Result cache (service.api.results): the upload is hashed as it is written; a result stored
under the same file, model and options is answered from the cache without the render limiter
(`X-Foley-Cache: hit`), else the render is kept after its response is sent (`miss`). Server-Timing
`total` runs from the route's first line (after HTTP parsing and query validation) to the
response being built: receiving, writing and hashing the upload, the lookup and, on a miss, the
render; not sending the body, nor the store and clean-up that follow it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.background import BackgroundTask
from starlette.types import Receive, Scope, Send

from service.api import results
from service.api.deps import ReadyEngine, State, Tenant, receive
from service.api.errors import ClientDisconnected
from service.api.params import (
    UNSAFE_NAME,
    UPLOAD_NAME,
    download_name,
    merge_params,
    upload_body,
)
from service.api.schemas import (
    MARKER_ANSWERS,
    MEDIA_TYPES,
    ErrorResponse,
    FoleyParams,
    TierInfo,
)
from service.api.state import ServiceState
from service.api.uploads import PARAM_FIELDS, Upload
from service.cache import Cache
from service.markers import markers_document, render_markers
from service.pipeline.loading import Engine
from service.pipeline.tiers import listed_tiers
from service.pipeline.types import RenderOptions, RenderResult

logger = logging.getLogger(__name__)
router = APIRouter()

_ERRORS = {
    400: "Malformed multipart body",
    401: "Missing or invalid API key (when the service has keys)",
    408: "The upload stalled or trickled (upload_timeout)",
    413: "Upload or input over a configured limit",
    415: "Not multipart/form-data",
    422: "Invalid parameter or undecodable media",
    503: "Model not loaded yet, or too many renders waiting",
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_ERROR_401 = {"model": ErrorResponse, "description": _ERRORS[401]}
_ERROR_503 = {"model": ErrorResponse, "description": "The model is not loaded yet"}
_FOLEY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The rendered file (Server-Timing: per-stage milliseconds; "
        "X-Foley-Cache: hit or miss; X-Foley-Gain-dB: the loudness gain applied, absent with "
        "loudness=off)",
        # The markers (format=events, otio) are JSON documents: docs/api.md, service.markers.
        "content": {
            media_type: {"schema": {"type": "object"}} if "json" in media_type else _BINARY
            for media_type in MEDIA_TYPES.values()
        },
    },
    **{status: {"model": ErrorResponse, "description": text} for status, text in _ERRORS.items()},
}


_UPLOAD_BODY = upload_body(FoleyParams)


@router.get("/v1/tiers", responses={401: _ERROR_401, 503: _ERROR_503})
async def tiers(state: State, tenant: Tenant) -> list[TierInfo]:
    """The model tiers this service has: `tier` on /v1/foley and the export queue picks one."""
    default = state.ready_engine().tier.name
    loaded = state.engines.loaded()
    return [
        TierInfo(
            name=t.name,
            kind=t.kind,
            version=t.version,
            default=t.name == default,
            loaded=t.name in loaded,
            size_bytes=t.size_bytes,
        )
        for t in listed_tiers(state.settings)
    ]


@router.post(
    "/v1/foley",
    response_class=FileResponse,
    responses=_FOLEY_RESPONSES,
    openapi_extra=_UPLOAD_BODY,
)
async def foley(
    request: Request,
    state: State,
    tenant: Tenant,
    engine: ReadyEngine,
    query: Annotated[FoleyParams, Query()],
) -> Response:
    """Upload a video (multipart field `file`); get its Foley track, or the video with it.

    `format` and `sample_rate` may come as query parameters or as form fields. The same file
    with the same parameters is answered from the cache (`X-Foley-Cache: hit`).
    """
    started = perf_counter()
    state.engines.name(query.tier)  # an unknown tier is refused before the upload is read
    state.check_capacity()
    workdir = Path(tempfile.mkdtemp(prefix="foley-", dir=state.settings.work_dir))
    try:
        upload = await receive(request, state, workdir / UPLOAD_NAME, PARAM_FIELDS)
        timings = {"upload": perf_counter() - started}
        params = merge_params(query, upload.fields)
        done = await render_upload(
            state=state, engine=engine, upload=upload, params=params, workdir=workdir,
            timings=timings, watch=request,
        )  # fmt: skip
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    timings["total"] = perf_counter() - started
    if isinstance(done, results.CachedResult):
        return _cached_response(done, upload, workdir, timings)
    return _rendered_response(state, done, upload, workdir, timings)


@dataclasses.dataclass(frozen=True)
class Rendered:
    """A render made for a request: its result, what is sent back (format, file) and the key
    it is kept under once sent."""

    result: RenderResult
    answer: tuple[str, Path]
    key: str


async def render_upload(
    *,
    state: ServiceState,
    engine: Engine,
    upload: Upload,
    params: FoleyParams,
    workdir: Path,
    timings: dict[str, float],
    watch: Request,
) -> results.CachedResult | Rendered:
    """The uploaded video's Foley with `params`: from the result cache, else rendered behind the
    render limiter in `workdir`, stopped if `watch`'s client goes away. Adds its stages to
    `timings`."""
    if params.tier not in (None, engine.tier.name):  # engine_for refuses an unknown one
        engine = await anyio.to_thread.run_sync(state.engine_for, params.tier)
    markers = params.format if params.format in MARKER_ANSWERS else None
    # The tier is part of the result's key by the engine that renders it.
    options = dataclasses.replace(params.options(format="wav" if markers else None), tier=None)
    # The weights' digest with the version: retrained weights never meet old results.
    model = f"{engine.tier.version}+{engine.tier.digest}"
    key = results.result_key(upload.sha256, engine.tier.name, model, options, markers)
    looked = perf_counter()
    cached = await _lookup(state.cache, key)
    state.metrics.cache_lookups.labels("result", "miss" if cached is None else "hit").inc()
    if cached is not None:
        timings["cache"] = perf_counter() - looked
        return cached
    # Its cost is its length, as declared (before a frame is decoded).
    info = await anyio.to_thread.run_sync(engine.probe, upload.path)
    with state.rendering.take(info.duration_s):
        result, queued, rendered = await _render(
            watch, state, engine, upload.path, workdir, options
        )
    state.metrics.rendered(result)
    stages = {name: s for name, s in result.timings.items() if name != "total"}
    timings.update({"queue": queued, **stages, "render": rendered})
    answer: tuple[str, Path] = (result.format, result.output)
    if markers is not None:
        answer = (markers, _markers_file(result, upload, workdir, markers))
    return Rendered(result, answer, key)


def _rendered_response(
    state: ServiceState,
    done: Rendered,
    upload: Upload,
    workdir: Path,
    timings: dict[str, float],
) -> Response:
    result = done.result
    logger.info(
        "rendered %s: %.2f s of video, %d frames, %.2f s total",
        result.format, result.duration_s, result.frames, timings["total"],
    )  # fmt: skip
    max_item_bytes = state.settings.cache_max_item_bytes
    fmt, path = done.answer
    return TempFileResponse(
        path,
        workdir,
        after_send=lambda: results.store(
            state.cache, done.key, result, max_item_bytes=max_item_bytes, answer=done.answer
        ),
        media_type=MEDIA_TYPES[fmt],
        filename=download_name(upload.filename, fmt),
        headers=_headers(
            timings,
            result.tier,
            result.model_version,
            result.duration_s,
            "miss",
            None if result.levelling is None else result.levelling.gain_db,
            result.warnings,
        ),
    )


def _markers_file(result: RenderResult, upload: Upload, workdir: Path, answer: str) -> Path:
    """The render's contact markers as the `answer` asks, written in `workdir`; the timeline
    names the upload and the track as they would be downloaded."""
    document = markers_document(
        result,
        video_name=Path(upload.filename).name if upload.filename else None,
        audio_name=download_name(upload.filename, "wav"),
    )
    fmt = MARKER_ANSWERS[answer]
    path = workdir / f"markers.{fmt}"
    path.write_text(render_markers(document, fmt))
    return path


async def _lookup(cache: Cache, key: str) -> results.CachedResult | None:
    if cache.in_process:
        # A dict look-up under a lock: microseconds, less than a hop to a worker thread.
        return results.lookup(cache, key)
    return await anyio.to_thread.run_sync(results.lookup, cache, key)


def _cached_response(
    cached: results.CachedResult,
    upload: Upload,
    workdir: Path,
    timings: dict[str, float],
) -> Response:
    logger.info(
        "cache hit %s: %.2f s of video, %.1f ms total",
        cached.format, cached.duration_s, 1000 * timings["total"],
    )  # fmt: skip
    name = download_name(upload.filename, cached.format)
    headers = _headers(
        timings,
        cached.tier,
        cached.model_version,
        cached.duration_s,
        "hit",
        cached.gain_db,
        cached.warnings,
    )
    return TempBytesResponse(
        cached.body,
        workdir,
        media_type=MEDIA_TYPES[cached.format],
        headers={**headers, "Content-Disposition": f'attachment; filename="{name}"'},
    )


def _headers(
    timings: Mapping[str, float],
    tier: str,
    model_version: str,
    duration_s: float,
    cache: str,
    gain_db: float | None,
    warnings: tuple[str, ...] = (),
) -> dict[str, str]:
    headers = {
        "Server-Timing": server_timing(timings),
        "X-Foley-Tier": tier,
        "X-Foley-Model-Version": model_version,
        "X-Foley-Duration": f"{duration_s:.3f}",
        "X-Foley-Cache": cache,
    }
    if gain_db is not None:
        headers["X-Foley-Gain-dB"] = f"{gain_db:+.2f}"
    if warnings:  # the file was damaged: what was done about it
        headers["X-Foley-Warning"] = "; ".join(warnings)
    return headers


async def _render(
    request: Request,
    state: ServiceState,
    engine: Engine,
    input_path: Path,
    workdir: Path,
    options: RenderOptions,
) -> tuple[RenderResult, float, float]:
    """The blocking render in a worker thread behind the limiter -> (result, wait s, render s).
    A client that goes away stops it within one window (ClientDisconnected), or before it
    starts if it was still waiting for a slot: nobody would read the answer."""
    state.check_capacity()
    output = workdir / f"foley.{options.format}"
    waiting_since = perf_counter()
    started_at: list[float] = []
    gone = threading.Event()

    def stop_if_gone(_: float) -> None:
        if gone.is_set():
            raise ClientDisconnected("the client went away during the render")

    def run() -> RenderResult:
        started_at.append(perf_counter())
        stop_if_gone(0.0)
        return engine.render(input_path, output, options, stop_if_gone)

    outcome: dict[str, RenderResult | Exception] = {}
    async with anyio.create_task_group() as tasks:

        async def render() -> None:
            try:
                outcome["result"] = await anyio.to_thread.run_sync(run, limiter=state.limiter)
            except Exception as exc:
                outcome["error"] = exc
            tasks.cancel_scope.cancel()

        tasks.start_soon(_watch_disconnect, request, gone)
        tasks.start_soon(render)
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, Exception)
        raise error
    result = outcome["result"]
    assert isinstance(result, RenderResult)
    return result, started_at[0] - waiting_since, perf_counter() - started_at[0]


async def _watch_disconnect(request: Request, gone: threading.Event) -> None:
    """Sets `gone` when the client disconnects. The body is read by now, so the next ASGI
    message of this request is its disconnect (a server sends nothing else)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()


def server_timing(seconds: Mapping[str, float]) -> str:
    """`{"decode": 0.0123, ...}` -> `decode;dur=12.3, ...` (Server-Timing wants milliseconds)."""
    return ", ".join(
        f"{UNSAFE_NAME.sub('_', name)};dur={1000 * value:.1f}" for name, value in seconds.items()
    )


class _RemovesWorkdir(Response):
    """Removes the request's work dir once the response is sent, after `after_send` (in a worker
    thread, like it), and on every failure to send.

    Starlette runs `background` only after a successful send; a client that disconnects
    mid-download would otherwise leave the directory behind.
    """

    workdir: Path

    @staticmethod
    def _cleanup(workdir: Path, after_send: Callable[[], object] | None) -> BackgroundTask:
        def run() -> None:
            try:
                if after_send is not None:
                    after_send()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)

        return BackgroundTask(run)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise


class TempFileResponse(_RemovesWorkdir, FileResponse):
    """A file from the work dir (a render)."""

    def __init__(
        self,
        path: Path,
        workdir: Path,
        *,
        after_send: Callable[[], object] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path, background=self._cleanup(workdir, after_send), **kwargs)
        self.workdir = workdir


class TempBytesResponse(_RemovesWorkdir):
    """Bytes in memory (a cached result), for a request that still has a work dir (its upload)."""

    def __init__(self, body: bytes | memoryview, workdir: Path, **kwargs: Any) -> None:
        super().__init__(body, background=self._cleanup(workdir, None), **kwargs)
        self.workdir = workdir
