"""One live preview socket: what the worker made for it and it has not sent yet (its outbox),
its three tasks, its statistics, and how it ends (protocol: service.preview.protocol).

Transport only: none of the tasks computes anything.
- receive: frames and control messages -> the preview worker (bounded: a client that sends
  faster than the worker computes is told so and closed);
- send: the worker's outputs -> the client, with latency statistics;
- a watchdog: the outbox is bounded too, and a client that stops reading is closed with
  CLOSE_SLOW_READER instead of being buffered for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict

import anyio
import numpy as np
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from service.config import Settings
from service.errors import Problem, validation_reason
from service.markers import timecode, timecode_rate
from service.pipeline.runner import Onset
from service.preview import protocol as p
from service.preview.worker import AudioOut, EndOut, Full, Output, PreviewWorker, Session

STATS_EVERY_S = 1.0
MEDIA_PROGRESS_S = 1.0  # of frame time: what keeps a session from being idle
BACKPRESSURE_POLL_S = 0.005  # how often a full session's queue is looked at again
MAX_CLOSE_REASON_BYTES = 123  # RFC 6455: a close frame's payload is 125 bytes, 2 of them the code


class Close(Exception):
    """End the connection with its Problem (as an error message) and a close code."""

    def __init__(self, code: str, reason: str, close: int) -> None:
        super().__init__(reason)
        self.problem, self.close = Problem(code, reason), close


class Connection:
    """A session's socket, from `ready` to its end: `serve` runs its tasks; `sent(late_s)` is
    told of each live chunk as it goes out (for the service's counters). Holds the session's
    outbox and its worker session (`open`)."""

    def __init__(
        self,
        ws: WebSocket,
        worker: PreviewWorker,
        session: Session,
        outbox: Outbox,
        *,
        settings: Settings,
        max_frame_bytes: int,
        sent: Callable[[float], None],
    ) -> None:
        self.ws, self.worker, self.session, self.outbox = ws, worker, session, outbox
        self.settings, self.max_frame_bytes, self.sent = settings, max_frame_bytes, sent

    @classmethod
    def open(
        cls,
        ws: WebSocket,
        worker: PreviewWorker,
        config: p.SessionConfig,
        *,
        settings: Settings,
        max_frame_bytes: int,
        sent: Callable[[float], None],
    ) -> Connection:
        """The connection of a new session of `worker`, which it closes when it ends (a
        context manager)."""
        outbox = Outbox(settings.preview_send_queue, settings.preview_send_queue_bytes)
        try:
            session = worker.open(config, deliverer(outbox))
        except Full as exc:
            raise Close("busy", str(exc), p.CLOSE_BUSY) from None
        return cls(
            ws, worker, session, outbox,
            settings=settings, max_frame_bytes=max_frame_bytes, sent=sent,
        )  # fmt: skip

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.close(self.session)

    async def serve(self) -> None:
        """Receive, send and watch until the session ends; raises Close for an ending with a
        Problem."""
        outcome: list[Close] = []

        async def guarded(task: Callable[[], Awaitable[None]]) -> None:
            try:
                await task()
            except Close as close:
                outcome.append(close)
            except WebSocketDisconnect:
                pass
            tasks.cancel_scope.cancel()

        async def watchdog() -> None:
            await self.outbox.overflow.wait()
            raise Close(
                "slow_reader",
                "the client is not reading the audio it asked for",
                p.CLOSE_SLOW_READER,
            )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(guarded, self._receive)
            tasks.start_soon(guarded, self._send)
            tasks.start_soon(guarded, watchdog)
        if outcome:
            raise outcome[0]

    async def _receive(self) -> None:
        """Frames to the worker until the client's end message; then waits (the sender finishes)."""
        ws, worker, session = self.ws, self.worker, self.session
        limit, settings = self.max_frame_bytes, self.settings
        idle_s = settings.preview_idle_timeout_s
        budget = MediaBudget(settings.preview_max_speed, settings.preview_burst_s)
        deadline = time.monotonic() + idle_s
        progressed_at: float | None = None  # the timestamp media time last advanced a second from
        while True:
            with anyio.move_on_after(deadline - time.monotonic()) as idle:
                message = await ws.receive()
            if idle.cancelled_caught:
                raise Close(
                    "idle",
                    f"the frames' time did not advance a second in {idle_s:g} s",
                    p.CLOSE_IDLE,
                )
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            received = time.perf_counter()
            data = message.get("bytes")
            if data is not None:
                if len(data) > limit + p.FRAME_HEADER.size:
                    raise Close(
                        "frame_too_large", f"frames are at most {limit} bytes", p.CLOSE_TOO_BIG
                    )
                try:
                    frame = p.parse_frame(data)
                except p.ProtocolError as exc:
                    raise Close(exc.code, str(exc), exc.close) from None
                if session.config.pixel_format == "jpeg":
                    # Decoded by this connection, in a thread: not on the event loop, and not in the
                    # worker every session shares (its header says its size first: FrameDecoder).
                    try:
                        rgb = await anyio.to_thread.run_sync(session.decoder, frame.payload)
                    except ValueError as exc:
                        raise Close(
                            "bad_frame", f"frame {frame.index}: {exc}", p.CLOSE_BAD_INPUT
                        ) from None
                    frame = dataclasses.replace(frame, decoded=rgb)
                if not budget.spend(frame.pts_s):
                    raise Close(
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
                raise Close(
                    "bad_message", validation_reason(exc.errors()), p.CLOSE_POLICY
                ) from None
            if isinstance(control, p.End):
                worker.end(session)
                await anyio.sleep_forever()  # the sender ends the connection once flushed
            raise Close("bad_message", "the config was already given", p.CLOSE_POLICY)

    async def _send(self) -> None:
        ws, session, outbox = self.ws, self.session, self.outbox
        rate = session.config.sample_rate
        stats = _Stats()
        while True:
            item = await outbox.get()
            if isinstance(item, Problem):
                close = {"internal": p.CLOSE_INTERNAL, "device_out_of_memory": p.CLOSE_BUSY}.get(
                    item.code, p.CLOSE_BAD_INPUT
                )
                raise Close(item.code, item.reason, close)
            if isinstance(item, EndOut):
                if stats.latency_ms:  # the last window's statistics, however short
                    await ws.send_text(stats.message().model_dump_json())
                await ws.send_text(
                    p.Ended(frames=item.frames, samples=item.samples).model_dump_json()
                )
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
                self.sent(sent - item.received_at)
            if stats.due():
                await ws.send_text(stats.message().model_dump_json())


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


def deliverer(outbox: Outbox) -> Callable[[Output], None]:
    """The worker thread's callback: post to the event loop, never block the worker."""
    loop = asyncio.get_running_loop()

    def deliver(item: Output) -> None:
        loop.call_soon_threadsafe(outbox.put, item)

    return deliver


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
                raise Close("overloaded", str(exc), p.CLOSE_BUSY) from None
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


async def close_socket(ws: WebSocket, close: Close) -> None:
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
