"""Export jobs over HTTP: `POST /v1/exports` (202 + job), `GET /v1/exports/{id}` (state,
progress, timings, error), `GET /v1/exports/{id}/result`, `POST /v1/exports/{id}/cancel`,
`DELETE /v1/exports/{id}` (the job and its files are gone).

The routes only move bytes and records: `service.jobs.JobManager` decides, and the render runs
in the embedded pool or on Celery workers. Blocking store calls (Redis) run in worker threads.
"""

from __future__ import annotations

import functools
import re
import shutil
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from service.api.deps import State, Tenant, receive
from service.api.params import UPLOAD_NAME, download_name, merge_params, upload_body
from service.api.schemas import MEDIA_TYPES, ErrorBody, ErrorResponse, FoleyParams
from service.api.state import ServiceState
from service.api.uploads import Upload
from service.context import REQUEST_ID
from service.jobs.manager import Accepted, JobManager
from service.jobs.records import JobRecord, new_job_id
from service.markers import MEDIA_TYPES as MARKER_MEDIA_TYPES
from service.markers import MarkersDocument, render_markers
from service.pipeline.types import DEFAULT_OPTIONS as DEFAULTS
from service.pipeline.types import OutputFormat, RenderOptions

router = APIRouter(prefix="/v1/exports", tags=["exports"])
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, as in the IETF draft


class ExportParams(FoleyParams):
    format: OutputFormat = Field(
        default=DEFAULTS.format,
        description="wav/flac: the Foley track; mp4/mov/mkv: the video with it",
    )
    tier: str | None = Field(
        default=DEFAULTS.tier, min_length=1, description="Model tier (default: the export tier)"
    )


EXPORT_FIELDS = frozenset(ExportParams.model_fields)


class ExportJob(BaseModel):
    id: str
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    progress: float = Field(description="0..1")
    format: str
    sample_rate: int
    tier: str
    loudness: float | Literal["off"] = Field(description="The render's loudness target, LUFS")
    replace_audio: bool = Field(description="Muxed outputs: the Foley alone")
    filename: str | None
    attempts: int = Field(description="Starts, a lost worker's included")
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    expires_at: datetime | None = Field(description="When the result and this record go")
    duration_s: float | None = Field(description="The video's duration, once rendered")
    result_bytes: int | None
    gain_db: float | None = Field(description="The loudness gain the render applied, in dB")
    request_id: str | None = Field(description="The X-Request-ID of the request that made it")
    warnings: list[str] = Field(description="Damage in the file the render worked around")
    result_url: str | None
    timings: dict[str, float] = Field(description="Seconds per stage")
    error: ErrorBody | None


_ERRORS = {
    400: "Malformed multipart body",
    401: "Missing or invalid API key",
    408: "The upload stalled or trickled (upload_timeout)",
    415: "Not multipart/form-data",
    404: "No such job (or another tenant's)",
    409: "The job is not in a state that allows this",
    410: "The result has expired",
    413: "Upload over the configured limit",
    422: "Invalid parameter",
    429: "This API key holds its share of the queue (key_queue_full)",
    503: "Too many jobs pending, or the queue is unavailable",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorResponse, "description": _ERRORS[c]} for c in codes}


def jobs_of(state: ServiceState) -> JobManager:
    if state.jobs is None:
        raise RuntimeError("the job manager is not running")
    return state.jobs


@router.post(
    "",
    status_code=202,
    responses=_responses(400, 401, 408, 413, 415, 422, 429, 503),
    openapi_extra=upload_body(ExportParams),
)
async def create_export(
    request: Request,
    response: Response,
    state: State,
    tenant: Tenant,
    query: Annotated[ExportParams, Query()],
    idempotency_key: Annotated[
        str | None,
        Header(
            pattern=IDEMPOTENCY_KEY.pattern,
            description="A retried request with the same key gets the first request's job",
        ),
    ] = None,
) -> ExportJob:
    """Upload a video (multipart field `file`) for a full-quality render in the background.

    `Idempotency-Key`: a retried request with the same key gets the first request's job.
    """
    jobs = jobs_of(state)
    state.engines.name(query.tier)  # an unknown tier is refused before the upload is read
    await anyio.to_thread.run_sync(jobs.check_capacity, tenant)
    receiving = jobs.storage.receiving_dir()
    try:
        upload = await receive(request, state, receiving / UPLOAD_NAME, EXPORT_FIELDS)
        params = merge_params(query, upload.fields)
        tier = state.engines.name(params.tier)
    except BaseException:
        await anyio.to_thread.run_sync(_remove_tree, receiving)
        raise
    accepted = await anyio.to_thread.run_sync(
        functools.partial(
            submit_export, jobs=jobs, tenant=tenant, upload=upload,
            options=params.options(tier=tier), idempotency_key=idempotency_key,
        )
    )  # fmt: skip
    response.headers["Location"] = f"/v1/exports/{accepted.record.id}"
    if not accepted.created:
        response.headers["Idempotent-Replayed"] = "true"
    return to_wire(accepted.record)


def submit_export(
    *,
    jobs: JobManager,
    tenant: str,
    upload: Upload,
    options: RenderOptions,
    idempotency_key: str | None,
) -> Accepted:
    """A job for the uploaded video, queued (or the job its idempotency key already made)."""
    record = JobRecord(
        id=new_job_id(),
        tenant=tenant,
        options=options,
        filename=upload.filename,
        request_id=REQUEST_ID.get(),
        idempotency_key=idempotency_key,
        upload_sha256=upload.sha256,
    )
    return jobs.submit(record, upload.path)


@router.get("/{job_id}", responses=_responses(401, 404))
async def get_export(job_id: str, state: State, tenant: Tenant) -> ExportJob:
    record = await anyio.to_thread.run_sync(jobs_of(state).get, tenant, job_id)
    return to_wire(record)


@router.get(
    "/{job_id}/result",
    response_class=FileResponse,
    responses={
        200: {"description": "The rendered file", "content": {t: {} for t in MEDIA_TYPES.values()}},
        **_responses(401, 404, 409, 410),
    },
)
async def get_export_result(job_id: str, state: State, tenant: Tenant) -> FileResponse:
    record, path = await anyio.to_thread.run_sync(jobs_of(state).result, tenant, job_id)
    return FileResponse(
        path,
        media_type=MEDIA_TYPES[record.format],
        filename=download_name(record.filename, record.format),
        headers={"X-Foley-Tier": record.tier},
    )


@router.get(
    "/{job_id}/events",
    responses={
        200: {
            "description": "The result's contact markers",
            "content": {media_type: {} for media_type in MARKER_MEDIA_TYPES.values()},
        },
        **_responses(401, 404, 409, 410),
    },
)
async def get_export_events(
    job_id: str,
    state: State,
    tenant: Tenant,
    format: Annotated[Literal["json", "otio", "csv"], Query()] = "json",
) -> Response:
    """The contacts of a finished job's render, as JSON, an OpenTimelineIO timeline or CSV
    (service.markers): times on the video's timeline, with SMPTE timecodes."""
    record, path = await anyio.to_thread.run_sync(jobs_of(state).markers, tenant, job_id)
    stored = MarkersDocument.model_validate_json(path.read_text())
    document = stored.model_copy(
        update={
            "video": stored.video.model_copy(update={"file": record.filename}),
            "audio_file": download_name(record.filename, record.format),
        }
    )
    return Response(
        render_markers(document, format),
        media_type=MARKER_MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="{_markers_name(record, format)}"'},
    )


def _markers_name(record: JobRecord, fmt: str) -> str:
    """`reel 1.mov` -> `reel_1.foley.otio`: named as the result it belongs to."""
    return download_name(record.filename, record.format).rsplit(".", 1)[0] + f".{fmt}"


@router.post("/{job_id}/cancel", status_code=202, responses=_responses(401, 404, 409))
async def cancel_export(job_id: str, state: State, tenant: Tenant) -> ExportJob:
    """Cancel: a queued job at once, a running one at its next window (poll for `cancelled`).
    The record stays, as for any finished job, until it expires or is deleted."""
    record = await anyio.to_thread.run_sync(jobs_of(state).cancel, tenant, job_id)
    return to_wire(record)


@router.delete("/{job_id}", status_code=204, responses=_responses(401, 404))
async def delete_export(job_id: str, state: State, tenant: Tenant) -> Response:
    """Delete the job, whatever its state: its record, result and markers are gone at once (the
    id answers 404 from then on); one still running stops at its next window."""
    await anyio.to_thread.run_sync(jobs_of(state).delete, tenant, job_id)
    return Response(status_code=204)


def to_wire(record: JobRecord) -> ExportJob:
    done = record.state == "succeeded"
    return ExportJob(
        id=record.id,
        state=record.state,
        progress=record.progress,
        **record.options.to_wire(),
        filename=record.filename,
        attempts=record.attempts,
        cancel_requested=record.cancel_requested,
        created_at=datetime.fromtimestamp(record.created_at, UTC),
        started_at=_time(record.started_at),
        finished_at=_time(record.finished_at),
        expires_at=_time(record.expires_at),
        duration_s=record.duration_s,
        result_bytes=record.result_bytes,
        gain_db=record.gain_db,
        request_id=record.request_id,
        warnings=record.warnings,
        result_url=f"/v1/exports/{record.id}/result" if done else None,
        timings=record.timings,
        error=ErrorBody(**asdict(record.error)) if record.error else None,
    )


def _time(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
