"""Stand-ins for a cache Redis that is not there: a fake clock for the breaker, a port nothing
listens on, and a server that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.redis_server import free_port


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def dead_url() -> str:
    """A Redis URL on a port that was free a moment ago: connections are refused."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def silent_server() -> Iterator[str]:
    """A Redis URL whose server accepts connections and never answers (a hung or overloaded
    Redis): every call can only end by its timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for conn in accepted:
            conn.close()
