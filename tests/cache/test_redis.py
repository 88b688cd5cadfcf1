"""The Redis cache against a real redis-server, and against one that is down or hangs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from service.cache import CircuitBreaker, RedisCache
from tests.cache.servers import FakeClock, dead_url, silent_server
from tests.redis_server import RedisServer

TIMEOUT_S = 0.05
FAILURES, RESET_S = 3, 10.0
# A call that fails must end near TIMEOUT_S. Generous for a loaded machine, and still far below
# what redis-py's default three retries with backoff would take.
QUICK_S = 0.5


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def redis_cache(url: str, clock: FakeClock, **kwargs) -> RedisCache:
    options = {"max_item_bytes": 1000, "ttl_s": 60.0, "prefix": "test:"} | kwargs
    breaker = CircuitBreaker(FAILURES, RESET_S, clock=clock)
    return RedisCache(url, timeout_s=TIMEOUT_S, breaker=breaker, **options)


def timed(call: Callable[[], object]) -> tuple[object, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def test_round_trip_under_the_prefix(redis_server: RedisServer, clock: FakeClock) -> None:
    cache = redis_cache(redis_server.url, clock)
    cache.set("k", b"\x00value\xff")
    assert cache.get("k") == b"\x00value\xff"
    assert cache.get("unknown") is None
    assert redis_server.client().get("test:k") == b"\x00value\xff"
    assert cache.healthy and cache.errors == 0


def test_values_expire_after_the_default_or_given_ttl(
    redis_server: RedisServer, clock: FakeClock
) -> None:
    cache = redis_cache(redis_server.url, clock, ttl_s=60.0)
    cache.set("default", b"v")
    cache.set("short", b"v", ttl_s=2.5)
    raw = redis_server.client()
    assert 59_000 < raw.pttl("test:default") <= 60_000
    assert 1_500 < raw.pttl("test:short") <= 2_500


def test_a_value_over_the_item_limit_is_not_sent(
    redis_server: RedisServer, clock: FakeClock
) -> None:
    cache = redis_cache(redis_server.url, clock, max_item_bytes=10)
    cache.set("fits", b"x" * 10)
    cache.set("big", b"x" * 11)
    raw = redis_server.client()
    assert raw.exists("test:fits") == 1
    assert raw.exists("test:big") == 0
    assert cache.get("big") is None


def test_an_error_answer_is_a_miss_not_an_exception(
    redis_server: RedisServer, clock: FakeClock
) -> None:
    redis_server.client().rpush("test:list", b"x")
    cache = redis_cache(redis_server.url, clock)
    assert cache.get("list") is None  # WRONGTYPE
    assert cache.errors == 1


@pytest.mark.parametrize("down", ["refused", "stopped"])
def test_redis_down_is_a_quick_miss_then_not_asked_at_all(
    down: str, redis_server: RedisServer, clock: FakeClock
) -> None:
    url = dead_url() if down == "refused" else redis_server.url
    cache = redis_cache(url, clock)
    if down == "stopped":
        cache.set("k", b"v")
        assert cache.get("k") == b"v"  # a pooled connection, then the server goes
        redis_server.stop()
    for call in [lambda: cache.get("k"), lambda: cache.set("k", b"v")] * 2:
        answer, seconds = timed(call)
        assert answer is None
        assert seconds < QUICK_S
    assert cache.errors == FAILURES and not cache.healthy
    assert cache.skipped == 1  # the fourth call: the circuit was open
    for _ in range(100):
        assert cache.get("k") is None
    assert cache.errors == FAILURES and cache.skipped == 101


def test_redis_that_never_answers_costs_one_timeout_per_call_until_the_circuit_opens(
    clock: FakeClock,
) -> None:
    with silent_server() as url:
        cache = redis_cache(url, clock)
        for _ in range(FAILURES):
            answer, seconds = timed(lambda: cache.get("k"))
            assert answer is None
            assert TIMEOUT_S * 0.9 < seconds < QUICK_S  # waited for the timeout, once
        assert not cache.healthy
        cache.set("k", b"v")
        assert cache.skipped == 1 and cache.errors == FAILURES  # not sent: no wait
        cache.close()


def test_after_the_reset_time_with_redis_back_the_circuit_closes_and_hits_resume(
    redis_server: RedisServer, clock: FakeClock
) -> None:
    cache = redis_cache(redis_server.url, clock)
    redis_server.stop()
    for _ in range(FAILURES):
        cache.get("k")
    assert not cache.healthy
    redis_server.start()
    assert cache.get("k") is None and not cache.healthy  # not asked before the reset time
    clock.advance(RESET_S)
    cache.set("k", b"back")  # the trial
    assert cache.healthy
    assert cache.get("k") == b"back"


def test_failures_are_logged_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    breaker = CircuitBreaker(1000, RESET_S, clock=clock)  # never opens here
    cache = RedisCache(dead_url(), timeout_s=TIMEOUT_S, breaker=breaker, max_item_bytes=1000)
    with caplog.at_level(logging.WARNING, logger="service.cache.redis"):
        for _ in range(20):
            assert cache.get("k") is None
    assert cache.errors == 20
    assert len(caplog.records) == 1
    assert "ConnectionError" in caplog.records[0].getMessage()


def test_the_circuit_opening_is_logged_even_within_the_minute(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    cache = redis_cache(dead_url(), clock)
    with caplog.at_level(logging.WARNING, logger="service.cache.redis"):
        for _ in range(FAILURES + 10):
            cache.get("k")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2  # the first failure, then the opening
    assert "circuit open" in messages[1]


def test_many_keys_in_one_round_trip(redis_server: RedisServer, clock: FakeClock) -> None:
    cache = redis_cache(redis_server.url, clock)
    cache.set_many([("a", b"1"), ("b", b"2"), ("big", b"x" * 1001)], ttl_s=30)
    assert cache.get_many(["a", "missing", "b", "big"]) == [b"1", None, b"2", None]
    assert 0 < redis_server.client().pttl("test:a") <= 30_000
    assert cache.get_many([]) == []


def test_many_keys_with_redis_down_are_misses(clock: FakeClock) -> None:
    cache = redis_cache(dead_url(), clock)
    cache.set_many([("a", b"1")])
    assert cache.get_many(["a", "b"]) == [None, None]
    assert cache.errors == 2
