"""`create_cache`: the store the settings ask for."""

from __future__ import annotations

from service.cache import MemoryCache, NoCache, RedisCache, create_cache
from service.config import Settings


def test_no_url_is_an_in_process_cache_with_the_settings_budget() -> None:
    cache = create_cache(
        Settings(cache_max_bytes=1000, cache_max_item_bytes=100, cache_ttl_s=5, redis_url=None)
    )
    assert isinstance(cache, MemoryCache)
    assert (cache.max_bytes, cache.max_item_bytes, cache.ttl_s) == (1000, 100, 5)


def test_a_budget_of_zero_is_no_cache() -> None:
    assert isinstance(create_cache(Settings(cache_max_bytes=0, redis_url=None)), NoCache)


def test_a_url_is_redis_with_short_timeouts_no_retries_and_a_breaker() -> None:
    settings = Settings(
        redis_url="redis://127.0.0.1:1/0",
        cache_max_bytes=0,  # the in-process budget does not apply to Redis
        cache_timeout_s=0.02,
        cache_breaker_failures=5,
        cache_breaker_reset_s=7,
    )
    cache = create_cache(settings)
    assert isinstance(cache, RedisCache)
    connection = cache.client.connection_pool.connection_kwargs
    assert connection["socket_timeout"] == connection["socket_connect_timeout"] == 0.02
    assert connection["retry"].get_retries() == 0
    assert (cache.breaker.failures, cache.breaker.reset_s) == (5, 7)
    assert cache.max_item_bytes == settings.cache_max_item_bytes
    assert cache.ttl_s == settings.cache_ttl_s
    cache.close()
