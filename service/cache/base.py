"""The cache interface: a byte store with expiry that may lose anything at any time.

A cache is an optimisation, never a dependency: `get` answers None when it does not know, and
`set` may drop the value. Neither raises for a store that is down or slow; `healthy` says
whether the store is answering (the Redis store's circuit breaker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Cache(Protocol):
    """Thread-safe: shared by every request and worker thread of a process."""

    name: str  # "memory", "redis", "none": for logs and /readyz
    # In this process: a call takes microseconds and may run on the event loop. Otherwise it
    # waits on the network and belongs in a worker thread.
    in_process: bool

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None: ...

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """`get` of each key, in one round trip where the store has one."""
        ...

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl_s: float | None = None) -> None:
        """`set` of each item, in one round trip where the store has one."""
        ...

    @property
    def healthy(self) -> bool: ...

    def close(self) -> None:
        """Release connections (the process is done with the cache)."""
        ...


class NoCache:
    """Remembers nothing (cache_max_bytes = 0)."""

    name = "none"
    in_process = True
    healthy = True

    def get(self, key: str) -> bytes | None:
        return None

    def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        return None

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [None] * len(keys)

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl_s: float | None = None) -> None:
        return None

    def close(self) -> None:
        return None
