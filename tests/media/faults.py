"""Decoder children that fail the way FFmpeg can on a malformed file: stand-ins for
`service.media.worker.run`, started with `decode._start(job, target=...)`. Each sends the file's
info as the real child does, then crashes (SIGSEGV) or hangs."""

from __future__ import annotations

import os
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path

from service.media.source import inspect, open_input
from service.media.worker import DecodeJob


def crash(conn: Connection, job: DecodeJob) -> None:
    _send_info(conn, job)
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(conn: Connection, job: DecodeJob) -> None:
    _send_info(conn, job)
    time.sleep(3600)


def _send_info(conn: Connection, job: DecodeJob) -> None:
    with open_input(Path(job.path), max_pixels=job.limits.max_pixels) as container:
        conn.send(("info", inspect(container, job.limits)[1]))
