"""The distributed cache: a Redis that evicts on its own (`maxmemory` + `allkeys-lru`).

A slow or absent Redis must cost a request milliseconds, never seconds and never an error:
- connect and socket timeouts of `timeout_s` each, and no retries (redis-py retries three times
  with backoff by default, seconds per call while Redis is down);
- every call behind a circuit breaker (service.cache.breaker): after a few failures in a row the
  store is not asked at all for a while, then one call tries it again;
- a failed call (connection refused or lost, timeout, an error answer) is counted and turns into
  a miss or a dropped set. It is logged at most once a minute, plus when the circuit opens and
  when Redis answers again: never one line per request.

`socket_timeout` bounds each read and the whole of each write (Python's `sendall`), so a value
must cross to Redis within `timeout_s`: keep `max_item_bytes` well under what the link moves in
that time.

Values larger than `max_item_bytes` are not sent (the key's previous value, if any, stays until
it expires). Keys get `prefix`, so the store may share a Redis with other users.

Thread-safe: redis-py's client draws a connection from its pool per call; the breaker and the
counters have their own locks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.cache.breaker import CircuitBreaker

logger = logging.getLogger(__name__)
T = TypeVar("T")
LOG_EVERY_S = 60.0


class RedisCache:
    name = "redis"
    in_process = False

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        breaker: CircuitBreaker,
        max_item_bytes: int,
        ttl_s: float | None = None,
        prefix: str = "foley:",
    ) -> None:
        self.client = redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
            # Off: a PING before commands on idle connections doubles their round trips. A
            # connection the server closed is noticed when taken from the pool and reopened.
            health_check_interval=0,
        )
        self.breaker = breaker
        self.max_item_bytes = max_item_bytes
        self.ttl_s = ttl_s
        self.prefix = prefix
        self.errors = 0  # calls that failed
        self.skipped = 0  # calls not made because the circuit was open
        self._lock = threading.Lock()
        self._unlogged = 0
        self._next_log = float("-inf")

    @property
    def healthy(self) -> bool:
        return self.breaker.closed

    def get(self, key: str) -> bytes | None:
        # Bytes, not str: the client is made without decode_responses.
        return cast("bytes | None", self._call("GET", self.client.get, self.prefix + key))

    def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        if len(value) > self.max_item_bytes:
            return
        ttl_s = ttl_s if ttl_s is not None else self.ttl_s
        px = max(1, round(ttl_s * 1000)) if ttl_s is not None else None
        self._call("SET", self.client.set, self.prefix + key, value, px=px)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        answer = cast(
            "list[bytes | None] | None",  # bytes: the client is made without decode_responses
            self._call("MGET", self.client.mget, [self.prefix + key for key in keys]),
        )
        return list(answer) if answer is not None else [None] * len(keys)

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl_s: float | None = None) -> None:
        items = [(k, v) for k, v in items if len(v) <= self.max_item_bytes]
        if not items:
            return
        ttl_s = ttl_s if ttl_s is not None else self.ttl_s
        px = max(1, round(ttl_s * 1000)) if ttl_s is not None else None

        def send() -> None:
            pipe = self.client.pipeline(transaction=False)
            for key, value in items:
                pipe.set(self.prefix + key, value, px=px)
            pipe.execute()

        self._call("SET (pipelined)", send)

    def close(self) -> None:
        """Close the pooled connections (at shutdown)."""
        self.client.close()

    def _call(self, command: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        if not self.breaker.allow():
            with self._lock:
                self.skipped += 1
            return None
        try:
            answer = call(*args, **kwargs)
        except (redis.RedisError, OSError) as exc:
            self._failed(command, exc)
            return None
        if self.breaker.record_success():
            logger.info("cache: redis answers again; the circuit is closed")
        return answer

    def _failed(self, command: str, exc: BaseException) -> None:
        opened = self.breaker.record_failure()
        now = time.monotonic()
        with self._lock:
            self.errors += 1
            self._unlogged += 1
            if not opened and now < self._next_log:
                return
            failures, self._unlogged = self._unlogged, 0
            self._next_log = now + LOG_EVERY_S
        logger.warning(
            "cache: redis %s failed (%s: %s); %d failed calls since the last report; circuit %s "
            "(requests go on without the cache)",
            command, type(exc).__name__, exc, failures, self.breaker.state,
        )  # fmt: skip
