"""`/v1/preview`: the live preview WebSocket (protocol: service.preview.protocol, docs/preview.md).

The route admits a connection (origin, API key, the tenant's share, the config) and holds the
tenant's slot while it lasts; the connection (service.preview.connection) opens the worker's
session, runs it and closes it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import anyio
from fastapi import APIRouter, WebSocket
from fastapi.responses import FileResponse
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from service.api.auth import tenant_of, valid_key
from service.api.metrics import LATE_S, Metrics
from service.api.state import ServiceState
from service.context import REQUEST_ID
from service.errors import FoleyError, echo, validation_reason
from service.preview import protocol as p
from service.preview.connection import Close, Connection, close_socket
from service.preview.worker import PreviewWorker

logger = logging.getLogger(__name__)
router = APIRouter()
STATIC = Path(__file__).resolve().parent / "static" / "preview"


@router.get("/preview", include_in_schema=False)
async def preview_page() -> FileResponse:
    """The browser client: plays a local video with its live Foley (static files in
    service/api/static/preview)."""
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.websocket("/v1/preview")
async def preview(ws: WebSocket) -> None:
    state: ServiceState = ws.app.state.foley
    refusal = _refusal(ws, state)
    if refusal is not None:
        state.metrics.preview_sessions.labels("refused_at_handshake").inc()
        await ws.close(p.CLOSE_POLICY, refusal)  # before accept: the handshake gets HTTP 403
        return
    await ws.accept()
    connection: Connection | None = None
    try:
        config = await _receive_config(ws, state)
        tenant = _tenant(ws, config, state.settings.api_keys)
        worker = _worker(state)
        with _tenant_slot(state, tenant), Connection.open(
            ws, worker, config, settings=state.settings,
            max_frame_bytes=_max_frame_bytes(state), sent=_counter(state.metrics),
        ) as connection:  # fmt: skip
            await ws.send_text(_ready(state, connection).model_dump_json())
            state.metrics.preview_sessions.labels("opened").inc()
            with state.metrics.preview_open.track_inprogress():
                await connection.serve()
    except Close as close:
        if connection is None:
            state.metrics.preview_sessions.labels(close.problem.code).inc()
        await close_socket(ws, close)
    except WebSocketDisconnect:
        pass
    except Exception:
        await close_socket(ws, _internal(connection.session.id if connection else None))


def _internal(session: str | None) -> Close:
    """A fault of the service's own (logged once, with its traceback): the client gets a code
    and a close, never a dropped connection."""
    logger.exception("preview session %s failed", session or "-")
    return Close("internal", "the service failed on this session", p.CLOSE_INTERNAL)


def _tenant(ws: WebSocket, config: p.SessionConfig, keys: list[str]) -> str:
    """The session's tenant, from the key it was let in with: the header's (checked at the
    handshake), else the config's."""
    if keys and "x-api-key" not in ws.headers and not valid_key(config.api_key or "", keys):
        raise Close(
            "unauthorized",
            "a valid API key is required (x-api-key header, or api_key in the config)",
            p.CLOSE_POLICY,
        )
    key = ws.headers.get("x-api-key", config.api_key or "")
    return tenant_of({"x-api-key": key}, keys)


def _worker(state: ServiceState) -> PreviewWorker:
    try:
        return state.preview_worker()
    except FoleyError as exc:
        raise Close(exc.code, exc.reason, p.CLOSE_BUSY) from None


@contextmanager
def _tenant_slot(state: ServiceState, tenant: str) -> Iterator[None]:
    """With API keys, one key holds at most its share of the sessions (the event loop's own
    count: no lock needed); the slot is the session's until it ends."""
    settings = state.settings
    held = state.preview_tenants.get(tenant, 0)
    share = settings.key_cap(settings.preview_max_sessions, settings.preview_key_share)
    if share is not None and held >= share:
        raise Close(
            "key_busy",
            f"this API key holds {share} live sessions, its share; close one first",
            p.CLOSE_BUSY,
        )
    state.preview_tenants[tenant] = held + 1
    try:
        yield
    finally:
        state.preview_tenants[tenant] -= 1


def _refusal(ws: WebSocket, state: ServiceState) -> str | None:
    """Why the handshake is refused, or None. Browsers send Origin: it must be this service's
    own or a configured one (CORS does not cover WebSockets). Other clients send none. A key
    in the header is checked here; browsers, which cannot set one, put it in the config
    message (never in the URL, which access logs keep)."""
    origin = ws.headers.get("origin")
    if origin is not None:
        host = ws.headers.get("host", "")
        if urlsplit(origin).netloc != host and origin not in state.settings.allowed_origins:
            return f"origin {origin} is not allowed"
    keys = state.settings.api_keys
    if keys and "x-api-key" in ws.headers and not valid_key(ws.headers["x-api-key"], keys):
        return "the x-api-key header is not a valid API key"
    return None


async def _receive_config(ws: WebSocket, state: ServiceState) -> p.SessionConfig:
    settings = state.settings
    with anyio.move_on_after(settings.preview_idle_timeout_s) as idle:
        message = await ws.receive()
    if idle.cancelled_caught:
        raise Close("idle", "no session config received", p.CLOSE_IDLE)
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    if message.get("text") is None:
        raise Close("bad_message", "the first message must be the JSON config", p.CLOSE_POLICY)
    try:
        config = p.ClientMessage.validate_json(message["text"])
    except ValidationError as exc:
        raise Close("invalid_config", validation_reason(exc.errors()), p.CLOSE_BAD_INPUT) from None
    if not isinstance(config, p.SessionConfig):
        raise Close("bad_message", "the first message must be the config", p.CLOSE_POLICY)
    if config.protocol != p.PROTOCOL_VERSION:
        raise Close(
            "unsupported_protocol",
            f"protocol {config.protocol}; this service speaks {p.PROTOCOL_VERSION}",
            p.CLOSE_BAD_INPUT,
        )
    if config.width * config.height > settings.preview_max_frame_pixels:
        raise Close(
            "frame_too_large",
            f"{config.width}x{config.height} is over {settings.preview_max_frame_pixels} pixels",
            p.CLOSE_BAD_INPUT,
        )
    engine = state.engine
    if config.tier not in (None, engine.tier.name if engine else None):
        raise Close("unknown_tier", f"tier {echo(config.tier)} is not loaded", p.CLOSE_BAD_INPUT)
    return config


def _max_frame_bytes(state: ServiceState) -> int:
    return state.settings.preview_max_frame_pixels * 3


def _ready(state: ServiceState, connection: Connection) -> p.Ready:
    tier, session = connection.worker.tier, connection.session
    config = session.config
    fps = tier.model_fps
    per_frame = None if fps is None else config.sample_rate // fps
    return p.Ready(
        session=session.id,
        tier=tier.name,
        model_version=tier.version,
        model_fps=fps,
        sample_rate=config.sample_rate,
        samples_per_frame=per_frame,
        lookahead_frames=tier.lookahead_frames,
        width=config.width,
        height=config.height,
        pixel_format=config.pixel_format,
        max_frame_bytes=_max_frame_bytes(state),
        gain_db=tier.live_gain_db if config.gain_db is None else config.gain_db,
        request_id=REQUEST_ID.get(),
    )


def _counter(metrics: Metrics) -> Callable[[float], None]:
    """What a connection tells of each live chunk it sends: counted, and counted late."""

    def sent(late_s: float) -> None:
        metrics.preview_chunks.inc()
        if late_s > LATE_S:
            metrics.preview_late.inc()

    return sent
