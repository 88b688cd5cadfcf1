"""The in-process cache: byte budget, least recently used out first, expiry."""

from __future__ import annotations

import threading
import time

from service.cache import MemoryCache


def test_round_trip_and_unknown_keys() -> None:
    cache = MemoryCache(1000)
    cache.set("a", b"alpha")
    assert cache.get("a") == b"alpha"
    assert cache.get("b") is None
    assert cache.healthy and cache.name == "memory"


def test_the_byte_budget_evicts_the_least_recently_used_first() -> None:
    cache = MemoryCache(300)
    for key in "abc":
        cache.set(key, key.encode() * 100)
    assert cache.bytes == 300
    assert cache.get("a") is not None  # now b is the least recently used
    cache.set("d", b"d" * 100)
    assert cache.get("b") is None
    assert [k for k in "acd" if cache.get(k) is not None] == ["a", "c", "d"]
    assert cache.bytes == 300 and len(cache) == 3


def test_one_large_value_evicts_as_many_as_it_needs() -> None:
    cache = MemoryCache(300)
    for key in "abc":
        cache.set(key, b"x" * 100)
    cache.set("big", b"y" * 250)
    assert len(cache) == 1 and cache.bytes == 250
    assert cache.get("big") == b"y" * 250


def test_a_value_over_the_item_limit_is_not_kept_and_forgets_the_old_one() -> None:
    cache = MemoryCache(1000, max_item_bytes=10)
    cache.set("k", b"small")
    cache.set("k", b"x" * 11)
    assert cache.get("k") is None
    assert cache.bytes == 0 and len(cache) == 0


def test_the_item_limit_is_never_above_the_budget() -> None:
    cache = MemoryCache(10, max_item_bytes=100)
    cache.set("k", b"x" * 11)
    assert cache.get("k") is None


def test_replacing_a_value_keeps_the_byte_count() -> None:
    cache = MemoryCache(1000)
    cache.set("k", b"x" * 100)
    cache.set("k", b"y" * 40)
    assert cache.get("k") == b"y" * 40
    assert cache.bytes == 40 and len(cache) == 1


def test_values_expire_after_their_ttl() -> None:
    cache = MemoryCache(1000, ttl_s=60)
    cache.set("default", b"kept")
    cache.set("short", b"gone", ttl_s=0.01)
    time.sleep(0.02)
    assert cache.get("default") == b"kept"
    assert cache.get("short") is None
    assert cache.bytes == 4  # the expired value was dropped when read


def test_without_a_ttl_values_stay_until_evicted() -> None:
    cache = MemoryCache(1000)
    cache.set("k", b"v")
    time.sleep(0.01)
    assert cache.get("k") == b"v"


def test_threads_never_push_it_over_budget() -> None:
    cache = MemoryCache(10_000)
    start = threading.Barrier(8)

    def fill(worker: int) -> None:
        start.wait()
        for i in range(500):
            cache.set(f"{worker}:{i}", bytes(100 + i % 50))
            cache.get(f"{worker}:{i // 2}")

    threads = [threading.Thread(target=fill, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0 < cache.bytes <= 10_000
    assert cache.bytes == sum(len(v) for v, _ in cache._items.values())


def test_many_keys_at_once() -> None:
    cache = MemoryCache(100, max_item_bytes=10)
    cache.set_many([("a", b"1"), ("b", b"22"), ("big", b"x" * 11)])
    assert cache.get_many(["a", "b", "c", "big"]) == [b"1", b"22", None, None]
