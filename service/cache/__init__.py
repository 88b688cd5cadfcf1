"""Caches that let the service skip work already done: one byte-store interface (`Cache`), kept
in this process within a byte budget or in Redis, and the keys the pipeline derives for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.cache.base import Cache, NoCache
from service.cache.breaker import CircuitBreaker
from service.cache.memory import MemoryCache
from service.config import Settings

if TYPE_CHECKING:
    from service.cache.redis import RedisCache

__all__ = ["Cache", "CircuitBreaker", "MemoryCache", "NoCache", "RedisCache", "create_cache"]


def __getattr__(name: str) -> object:
    # redis-py takes ~80 ms to import: only a process that talks to Redis pays it.
    if name == "RedisCache":
        from service.cache.redis import RedisCache

        return RedisCache
    raise AttributeError(name)


def create_cache(settings: Settings) -> Cache:
    """The cache the settings ask for: Redis at `redis_url`, else in this process within
    `cache_max_bytes`, else (a budget of 0) none."""
    if settings.redis_url:
        from service.cache.redis import RedisCache

        breaker = CircuitBreaker(settings.cache_breaker_failures, settings.cache_breaker_reset_s)
        return RedisCache(
            settings.redis_url,
            timeout_s=settings.cache_timeout_s,
            breaker=breaker,
            max_item_bytes=settings.cache_max_item_bytes,
            ttl_s=settings.cache_ttl_s,
        )
    if settings.cache_max_bytes == 0:
        return NoCache()
    return MemoryCache(
        settings.cache_max_bytes,
        max_item_bytes=settings.cache_max_item_bytes,
        ttl_s=settings.cache_ttl_s,
    )
