"""The embedded cache: in this process, least recently used first out, within a byte budget."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence


class MemoryCache:
    """At most `max_bytes` of values (keys not counted); a value larger than `max_item_bytes`
    is not kept. Expired values are dropped when read or evicted."""

    name = "memory"
    in_process = True
    healthy = True

    def __init__(
        self, max_bytes: int, *, max_item_bytes: int | None = None, ttl_s: float | None = None
    ) -> None:
        self.max_bytes = max_bytes
        self.max_item_bytes = min(max_bytes, max_item_bytes or max_bytes)
        self.ttl_s = ttl_s
        self.bytes = 0
        self._items: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            value, expires = item
            if expires <= time.monotonic():
                self._drop(key)
                return None
            self._items.move_to_end(key)
            return value

    def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        ttl_s = ttl_s if ttl_s is not None else self.ttl_s
        expires = time.monotonic() + ttl_s if ttl_s is not None else float("inf")
        with self._lock:
            if key in self._items:
                self._drop(key)
            if len(value) > self.max_item_bytes:
                return
            self._items[key] = (value, expires)
            self.bytes += len(value)
            while self.bytes > self.max_bytes:
                self._drop(next(iter(self._items)))

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self.get(key) for key in keys]

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl_s: float | None = None) -> None:
        for key, value in items:
            self.set(key, value, ttl_s)

    def close(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._items)

    def _drop(self, key: str) -> None:
        value, _ = self._items.pop(key)
        self.bytes -= len(value)
