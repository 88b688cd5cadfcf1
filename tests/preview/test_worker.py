"""The preview worker and the transport's bounds, without a network in between."""

from __future__ import annotations

import asyncio
import threading
import time

import anyio
import numpy as np
import pytest

from service.config import Settings
from service.errors import DeviceOutOfMemory, Problem
from service.preview import connection
from service.preview import protocol as p
from service.preview.worker import AudioOut, EndOut, Full, PreviewWorker

CONFIG = p.SessionConfig(type="config", width=96, height=96)
FRAME = np.zeros((96, 96, 3), np.uint8).tobytes()


def _worker(real_engine, **kw) -> PreviewWorker:
    options = {"max_sessions": 4, "queue_frames": 8, "batch_window_s": 0.05} | kw
    return PreviewWorker(real_engine.tier, real_engine.backend, **options)


def test_frames_of_the_same_instant_share_one_batch(real_engine) -> None:
    worker = _worker(real_engine)
    try:
        outputs: dict[str, list] = {"a": [], "b": []}
        done = threading.Event()

        def collect(name):
            def deliver(item):
                outputs[name].append(item)
                if all(any(isinstance(o, EndOut) for o in v) for v in outputs.values()):
                    done.set()

            return deliver

        a, b = worker.open(CONFIG, collect("a")), worker.open(CONFIG, collect("b"))
        for k in range(6):
            for session in (a, b):
                worker.submit(session, p.parse_frame(p.pack_frame(k, k / 30, FRAME)), 0.0)
            time.sleep(0.1)  # longer than the window: one batch per instant
        worker.end(a)
        worker.end(b)
        assert done.wait(10)
        batches = [
            o.batch for v in outputs.values() for o in v if isinstance(o, AudioOut) and o.batch
        ]
        assert batches and set(batches) == {2}
        audio_a = np.concatenate([o.samples for o in outputs["a"] if isinstance(o, AudioOut)])
        audio_b = np.concatenate([o.samples for o in outputs["b"] if isinstance(o, AudioOut)])
        np.testing.assert_array_equal(audio_a, audio_b)  # the same frames, the same audio
        assert worker.sessions == 0
    finally:
        worker.stop()


def test_sessions_and_waiting_frames_are_bounded(real_engine) -> None:
    worker = _worker(real_engine, max_sessions=1, queue_frames=2, batch_window_s=1.0)
    try:
        session = worker.open(CONFIG, lambda item: None)
        with pytest.raises(Full):
            worker.open(CONFIG, lambda item: None)
        frames = [p.parse_frame(p.pack_frame(k, k / 30, FRAME)) for k in range(3)]
        worker.submit(session, frames[0], 0.0)
        worker.submit(session, frames[1], 0.0)
        with pytest.raises(Full):
            worker.submit(session, frames[2], 0.0)
        worker.close(session)
        worker.open(CONFIG, lambda item: None)  # a closed session frees its slot
    finally:
        worker.stop()


class _DeafClient:
    """A WebSocket whose client sends frames in real time but never reads: every send blocks."""

    def __init__(self) -> None:
        self.sent_frames = 0

    async def receive(self) -> dict:
        if self.sent_frames > 300:
            await anyio.sleep_forever()
        await anyio.sleep(1 / 60)
        self.sent_frames += 1
        k = self.sent_frames
        return {"type": "websocket.receive", "bytes": p.pack_frame(k, k / 30, FRAME)}

    async def send_bytes(self, data: bytes) -> None:
        await anyio.sleep_forever()

    async def send_text(self, data: str) -> None:
        await anyio.sleep_forever()


def test_a_client_that_stops_reading_is_closed_not_buffered(real_engine) -> None:
    settings = Settings(preview_send_queue=4)
    worker = _worker(real_engine, batch_window_s=0.0)

    async def run() -> connection.Close:
        ws = _DeafClient()
        with pytest.raises(connection.Close) as closed, connection.Connection.open(
            ws, worker, CONFIG, settings=settings,
            max_frame_bytes=10**6, sent=lambda late_s: None,
        ) as live, anyio.fail_after(20):  # fmt: skip
            assert worker.sessions == 1
            await live.serve()
        assert worker.sessions == 0  # the connection closed its session as it ended
        assert live.outbox.queue.qsize() <= settings.preview_send_queue
        assert ws.sent_frames < 100  # closed within a few frames of the outbox filling
        return closed.value

    try:
        close = asyncio.run(run())
    finally:
        worker.stop()
    assert (close.problem.code, close.close) == ("slow_reader", p.CLOSE_SLOW_READER)


class FullGpu:
    """A backend whose device has run out of memory until `freed` is set."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.tier = inner, inner.name, inner.tier
        self.freed = threading.Event()

    def run(self, stage, inputs):
        if not self.freed.is_set():
            raise DeviceOutOfMemory("the GPU ran out of memory in the encoder stage")
        return self.inner.run(stage, inputs)


def test_a_gpu_out_of_memory_ends_that_batch_with_its_code_and_the_worker_goes_on(
    real_engine,
) -> None:
    backend = FullGpu(real_engine.backend)
    worker = PreviewWorker(real_engine.tier, backend, max_sessions=4, queue_frames=8,
                           batch_window_s=0.0)  # fmt: skip
    try:
        got: list = []
        first = worker.open(CONFIG, got.append)
        for k in range(4):  # past any tier's lookahead: its models run
            worker.submit(first, p.parse_frame(p.pack_frame(k, k / 30, FRAME)), 0.0)
        deadline = time.monotonic() + 10
        while not any(isinstance(o, Problem) for o in got):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (failed,) = [o for o in got if isinstance(o, Problem)]
        assert failed.code == "device_out_of_memory"
        backend.freed.set()
        ended = threading.Event()
        after = worker.open(CONFIG, lambda o: isinstance(o, EndOut) and ended.set())
        for k in range(4):
            worker.submit(after, p.parse_frame(p.pack_frame(k, k / 30, FRAME)), 0.0)
        worker.end(after)
        assert ended.wait(10)
    finally:
        worker.stop()
