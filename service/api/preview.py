"""`/v1/preview`: the live preview WebSocket (protocol: service.preview.protocol, docs/preview.md).

Transport only. Three tasks per connection on the event loop, none of which computes anything:
- receive: frames and control messages -> the preview worker (bounded: a client that sends
  faster than the worker computes is told so and closed);
- send: the worker's outputs -> the client, with latency statistics;
- a watchdog: the outbox is bounded too, and a client that stops reading is closed with
  CLOSE_SLOW_READER instead of being buffered for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import numpy as np
from fastapi import APIRouter, WebSocket
from fastapi.responses import FileResponse
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from service.api.auth import tenant_of, valid_key
from service.api.errors import validation_reason
from service.api.metrics import LATE_S, Metrics
from service.api.state import ServiceState
from service.context import REQUEST_ID
from service.errors import FoleyError, Problem, echo
from service.markers import timecode, timecode_rate
from service.pipeline.runner import Onset
from service.preview import protocol as p
from service.preview.worker import AudioOut, EndOut, Full, Output, PreviewWorker, Session

logger = logging.getLogger(__name__)
router = APIRouter()
STATS_EVERY_S = 1.0
MEDIA_PROGRESS_S = 1.0  # of frame time: what keeps a session from being idle
BACKPRESSURE_POLL_S = 0.005  # how often a full session's queue is looked at again
MAX_CLOSE_REASON_BYTES = 123  # RFC 6455: a close frame's payload is 125 bytes, 2 of them the code
STATIC = Path(__file__).resolve().parent / "static" / "preview"


class _Close(Exception):
    """End the connection with its Problem (as an error message) and a close code."""

    def __init__(self, code: str, reason: str, close: int) -> None:
        super().__init__(reason)
        self.problem, self.close = Problem(code, reason), close


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
    held = _Held()
    try:
        outbox = await _open(ws, state, held)
        assert held.worker is not None and held.session is not None
        await _serve(ws, state, held.worker, held.session, outbox)
    except _Close as close:
        if held.session is None:
            state.metrics.preview_sessions.labels(close.problem.code).inc()
        await _close(ws, close)
    except WebSocketDisconnect:
        pass
    except Exception:
        await _close(ws, _internal(held.session.id if held.session else None))
    finally:
        held.release(state)


@dataclasses.dataclass
class _Held:
    """What a connection holds until it ends: its tenant's session slot, its worker session."""

    tenant: str | None = None
    worker: PreviewWorker | None = None
    session: Session | None = None

    def release(self, state: ServiceState) -> None:
        if self.worker is not None and self.session is not None:
            self.worker.close(self.session)
            state.metrics.preview_open.dec()
        if self.tenant is not None:
            state.preview_tenants[self.tenant] -= 1


async def _open(ws: WebSocket, state: ServiceState, held: _Held) -> Outbox:
    """The session: its config read and checked, its tenant's slot taken, the worker's session
    opened and `ready` sent; what it takes is in `held` as soon as it is taken."""
    config = await _receive_config(ws, state)
    keys = state.settings.api_keys
    if keys and "x-api-key" not in ws.headers and not valid_key(config.api_key or "", keys):
        raise _Close(
            "unauthorized",
            "a valid API key is required (x-api-key header, or api_key in the config)",
            p.CLOSE_POLICY,
        )
    tenant = _tenant(ws, config, keys)
    try:
        worker = state.preview_worker()
    except FoleyError as exc:
        raise _Close(exc.code, exc.reason, p.CLOSE_BUSY) from None
    outbox = Outbox(state.settings.preview_send_queue, state.settings.preview_send_queue_bytes)
    _take_tenant_slot(state, tenant)
    held.tenant, held.worker = tenant, worker
    try:
        held.session = worker.open(config, _deliverer(outbox))
    except Full as exc:
        raise _Close("busy", str(exc), p.CLOSE_BUSY) from None
    await ws.send_text(_ready(state, worker, held.session).model_dump_json())
    state.metrics.preview_sessions.labels("opened").inc()
    state.metrics.preview_open.inc()
    return outbox


def _internal(session: str | None) -> _Close:
    """A fault of the service's own (logged once, with its traceback): the client gets a code
    and a close, never a dropped connection."""
    logger.exception("preview session %s failed", session or "-")
    return _Close("internal", "the service failed on this session", p.CLOSE_INTERNAL)


def _tenant(ws: WebSocket, config: p.SessionConfig, keys: list[str]) -> str:
    """The session's tenant, from the key it was let in with (header, else config)."""
    key = ws.headers.get("x-api-key", config.api_key or "")
    return tenant_of({"x-api-key": key}, keys)


def _take_tenant_slot(state: ServiceState, tenant: str) -> None:
    """With API keys, one key holds at most its share of the sessions (the event loop's own
    count: no lock needed)."""
    settings = state.settings
    held = state.preview_tenants.get(tenant, 0)
    share = settings.key_cap(settings.preview_max_sessions, settings.preview_key_share)
    if share is not None and held >= share:
        raise _Close(
            "key_busy",
            f"this API key holds {share} live sessions, its share; close one first",
            p.CLOSE_BUSY,
        )
    state.preview_tenants[tenant] = held + 1


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
        raise _Close("idle", "no session config received", p.CLOSE_IDLE)
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    if message.get("text") is None:
        raise _Close("bad_message", "the first message must be the JSON config", p.CLOSE_POLICY)
    try:
        config = p.ClientMessage.validate_json(message["text"])
    except ValidationError as exc:
        raise _Close("invalid_config", validation_reason(exc.errors()), p.CLOSE_BAD_INPUT) from None
    if not isinstance(config, p.SessionConfig):
        raise _Close("bad_message", "the first message must be the config", p.CLOSE_POLICY)
    if config.protocol != p.PROTOCOL_VERSION:
        raise _Close(
            "unsupported_protocol",
            f"protocol {config.protocol}; this service speaks {p.PROTOCOL_VERSION}",
            p.CLOSE_BAD_INPUT,
        )
    if config.width * config.height > settings.preview_max_frame_pixels:
        raise _Close(
            "frame_too_large",
            f"{config.width}x{config.height} is over {settings.preview_max_frame_pixels} pixels",
            p.CLOSE_BAD_INPUT,
        )
    engine = state.engine
    if config.tier not in (None, engine.tier.name if engine else None):
        raise _Close("unknown_tier", f"tier {echo(config.tier)} is not loaded", p.CLOSE_BAD_INPUT)
    return config


def _max_frame_bytes(state: ServiceState) -> int:
    return state.settings.preview_max_frame_pixels * 3


def _ready(state: ServiceState, worker: PreviewWorker, session: Session) -> p.Ready:
    tier, config = worker.tier, session.config
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


class Outbox:
    """What the worker made for one socket and the socket has not sent yet, bounded in messages
    and in bytes of audio (one message of a long gap's audio is megabytes): past either, the
    client is not reading what it asked for and `overflow` is set."""

    def __init__(self, messages: int, max_bytes: int) -> None:
        self.queue: asyncio.Queue[Output] = asyncio.Queue(maxsize=messages)
        self.max_bytes, self.bytes = max_bytes, 0
        self.overflow = asyncio.Event()

    def put(self, item: Output) -> None:
        size = _size(item)
        if self.bytes + size > self.max_bytes or self.queue.full():
            self.overflow.set()
            return
        self.queue.put_nowait(item)
        self.bytes += size

    async def get(self) -> Output:
        item = await self.queue.get()
        self.bytes -= _size(item)
        return item


def _size(item: Output) -> int:
    return item.samples.nbytes if isinstance(item, AudioOut) else 0


def _deliverer(outbox: Outbox) -> Callable[[Output], None]:
    """The worker thread's callback: post to the event loop, never block the worker."""
    loop = asyncio.get_running_loop()

    def deliver(item: Output) -> None:
        loop.call_soon_threadsafe(outbox.put, item)

    return deliver


async def _serve(
    ws: WebSocket,
    state: ServiceState,
    worker: PreviewWorker,
    session: Session,
    outbox: Outbox,
) -> None:
    outcome: list[_Close] = []

    async def guarded(task: Callable[[], object]) -> None:
        try:
            await task()  # type: ignore[misc]
        except _Close as close:
            outcome.append(close)
        except WebSocketDisconnect:
            pass
        tasks.cancel_scope.cancel()

    async def watchdog() -> None:
        await outbox.overflow.wait()
        raise _Close(
            "slow_reader", "the client is not reading the audio it asked for", p.CLOSE_SLOW_READER
        )

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(guarded, lambda: _receive(ws, state, worker, session))
        tasks.start_soon(guarded, lambda: _send(ws, session, outbox, state.metrics))
        tasks.start_soon(guarded, watchdog)
    if outcome:
        raise outcome[0]


async def _receive(
    ws: WebSocket, state: ServiceState, worker: PreviewWorker, session: Session
) -> None:
    """Frames to the worker until the client's end message; then waits (the sender finishes)."""
    limit = _max_frame_bytes(state)
    settings = state.settings
    idle_s = settings.preview_idle_timeout_s
    budget = MediaBudget(settings.preview_max_speed, settings.preview_burst_s)
    deadline = time.monotonic() + idle_s
    progressed_at: float | None = None  # the timestamp media time last advanced a second from
    while True:
        with anyio.move_on_after(deadline - time.monotonic()) as idle:
            message = await ws.receive()
        if idle.cancelled_caught:
            raise _Close(
                "idle", f"the frames' time did not advance a second in {idle_s:g} s", p.CLOSE_IDLE
            )
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        received = time.perf_counter()
        data = message.get("bytes")
        if data is not None:
            if len(data) > limit + p.FRAME_HEADER.size:
                raise _Close(
                    "frame_too_large", f"frames are at most {limit} bytes", p.CLOSE_TOO_BIG
                )
            try:
                frame = p.parse_frame(data)
            except p.ProtocolError as exc:
                raise _Close(exc.code, str(exc), exc.close) from None
            if session.config.pixel_format == "jpeg":
                # Decoded by this connection, in a thread: not on the event loop, and not in the
                # worker every session shares (its header says its size first: FrameDecoder).
                try:
                    rgb = await anyio.to_thread.run_sync(session.decoder, frame.payload)
                except ValueError as exc:
                    raise _Close(
                        "bad_frame", f"frame {frame.index}: {exc}", p.CLOSE_BAD_INPUT
                    ) from None
                frame = dataclasses.replace(frame, decoded=rgb)
            if not budget.spend(frame.pts_s):
                raise _Close(
                    "over_budget",
                    f"the frames' time runs ahead of real time faster than "
                    f"{budget.rate:g}x (after {budget.burst_s:g} s)",
                    p.CLOSE_BUSY,
                )
            await _submit(worker, session, frame, received, idle_s)
            if progressed_at is None or frame.pts_s >= progressed_at + MEDIA_PROGRESS_S:
                progressed_at, deadline = frame.pts_s, time.monotonic() + idle_s
            continue
        try:
            control = p.ClientMessage.validate_json(message.get("text") or "")
        except ValidationError as exc:
            raise _Close("bad_message", validation_reason(exc.errors()), p.CLOSE_POLICY) from None
        if isinstance(control, p.End):
            worker.end(session)
            await anyio.sleep_forever()  # the sender ends the connection once flushed
        raise _Close("bad_message", "the config was already given", p.CLOSE_POLICY)


async def _submit(
    worker: PreviewWorker, session: Session, frame: p.FrameMessage, received: float, wait_s: float
) -> None:
    """The frame to the worker; while the session's queue is full, the socket is not read (the
    client is slowed: TCP pushes back), for at most `wait_s`."""
    waited_from = time.monotonic()
    while True:
        try:
            worker.submit(session, frame, received)
            return
        except Full as exc:
            if time.monotonic() - waited_from > wait_s:
                raise _Close("overloaded", str(exc), p.CLOSE_BUSY) from None
        await anyio.sleep(BACKPRESSURE_POLL_S)


class MediaBudget:
    """A token bucket of frame time: each frame spends the time since the frame before; the
    bucket refills at `rate` seconds per wall second, up to `burst_s`."""

    def __init__(self, rate: float, burst_s: float) -> None:
        self.rate, self.burst_s = rate, burst_s
        self.left = burst_s
        self._last_pts: float | None = None
        self._last_wall = time.monotonic()

    def spend(self, pts_s: float) -> bool:
        now = time.monotonic()
        self.left = min(self.burst_s, self.left + (now - self._last_wall) * self.rate)
        self._last_wall = now
        step = 0.0 if self._last_pts is None else max(0.0, pts_s - self._last_pts)
        step = min(step, p.MAX_FRAME_GAP_S)  # a longer gap is the worker's `frame_gap`
        self._last_pts = pts_s
        self.left -= step
        return self.left >= 0.0


async def _send(ws: WebSocket, session: Session, outbox: Outbox, metrics: Metrics) -> None:
    rate = session.config.sample_rate
    stats = _Stats()
    while True:
        item = await outbox.get()
        if isinstance(item, Problem):
            close = {"internal": p.CLOSE_INTERNAL, "device_out_of_memory": p.CLOSE_BUSY}.get(
                item.code, p.CLOSE_BAD_INPUT
            )
            raise _Close(item.code, item.reason, close)
        if isinstance(item, EndOut):
            if stats.latency_ms:  # the last window's statistics, however short
                await ws.send_text(stats.message().model_dump_json())
            await ws.send_text(p.Ended(frames=item.frames, samples=item.samples).model_dump_json())
            await ws.close(p.CLOSE_NORMAL)
            return
        assert isinstance(item, AudioOut)
        t0 = session.t0
        await ws.send_bytes(
            p.pack_audio(
                item.samples, sample_rate=rate, start=item.start, start_s=t0 + item.start / rate
            )
        )
        for onset in item.onsets:
            await ws.send_text(onset_message(session.config, t0, rate, onset).model_dump_json())
        if item.batch:
            sent = time.perf_counter()
            stats.add(item, sent)
            metrics.preview_chunks.inc()
            if sent - item.received_at > LATE_S:
                metrics.preview_late.inc()
        if stats.due():
            await ws.send_text(stats.message().model_dump_json())


class _Stats:
    """Latency over the last window of audio chunks sent."""

    def __init__(self) -> None:
        self.chunks = 0
        self.compute_ms: list[float] = []
        self.latency_ms: list[float] = []
        self.batches: list[int] = []
        self.last = time.perf_counter()

    def add(self, item: AudioOut, sent: float) -> None:
        self.chunks += 1
        self.compute_ms.append(item.compute_s * 1000)
        self.latency_ms.append((sent - item.received_at) * 1000)
        self.batches.append(item.batch)

    def due(self) -> bool:
        return bool(self.latency_ms) and time.perf_counter() - self.last >= STATS_EVERY_S

    def message(self) -> p.Stats:
        compute, latency = np.asarray(self.compute_ms), np.asarray(self.latency_ms)
        out = p.Stats(
            chunks=self.chunks,
            compute_ms_p50=round(float(np.percentile(compute, 50)), 3),
            compute_ms_p99=round(float(np.percentile(compute, 99)), 3),
            latency_ms_p50=round(float(np.percentile(latency, 50)), 3),
            latency_ms_p99=round(float(np.percentile(latency, 99)), 3),
            batch_mean=round(float(np.mean(self.batches)), 2),
        )
        self.compute_ms, self.latency_ms, self.batches = [], [], []
        self.last = time.perf_counter()
        return out


async def _close(ws: WebSocket, close: _Close) -> None:
    """Send the error (if the socket still takes it) and close with its code."""
    if ws.application_state != WebSocketState.CONNECTED:
        return
    with anyio.move_on_after(1.0):
        try:
            await ws.send_text(p.ErrorMessage(**asdict(close.problem)).model_dump_json())
            await ws.close(close.close, close_reason(close.problem.reason))
        except (WebSocketDisconnect, RuntimeError):
            pass


def close_reason(reason: str) -> str:
    """`reason` cut to what a close frame holds: 123 bytes of UTF-8 (a cut character dropped)."""
    return reason.encode()[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore")


def onset_message(config: p.SessionConfig, t0: float, rate: int, onset: Onset) -> p.Onset:
    time_s = t0 + onset.sample / rate
    stamp = None
    if config.fps and time_s >= 0:  # a timecode counts from zero: none before it
        fps, drop = timecode_rate(config.fps)
        stamp = timecode(time_s, fps, drop)
    marker = onset.marker
    return p.Onset(
        time_s=time_s,
        sample=onset.sample,
        kind=marker.kind,
        strength=marker.strength,
        material=marker.material,
        timecode=stamp,
    )
