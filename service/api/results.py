"""Rendered results, kept whole in a `Cache` so that a repeated upload is answered without a render.

Key: the SHA-256 of the uploaded file's bytes, the tier's name and model version, and every field
of `RenderOptions` (so an option added there is part of the key without a change here):

    result:v4:<sha256 hex>:<tier>:<model version>:format=wav,loudness=-23.0,...

A result is only returned for the same bytes, through the same model, with the same options; a
new model version never sees an old one's results. (The pipeline's window memo works below
this, on decoded content, for what a whole-file key cannot match.)

Value: `v1` layout, a 4-byte big-endian header length, a JSON header with what the response
needs besides the bytes, then the file's bytes. `lookup` returns the body as a memoryview of
the stored value, so a hit copies nothing.

Stateless functions. `lookup` blocks on the store (Redis: up to its timeout): call it from a
worker thread unless the store is in this process. `store` also reads the rendered file: call it
from a worker thread always.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from service.cache.base import Cache
from service.pipeline.types import RenderOptions, RenderResult

logger = logging.getLogger(__name__)
LAYOUT = "v4"  # bump when the key or value layout changes: old entries are then never read
_HEADER_LEN = 4


@dataclass(frozen=True)
class CachedResult:
    format: str
    sample_rate: int
    duration_s: float
    frames: int
    tier: str
    model_version: str
    body: bytes | memoryview
    gain_db: float | None = None  # the loudness gain applied (None: loudness off)
    warnings: tuple[str, ...] = ()  # damage in the file the render worked around


def result_key(
    content_sha256: str,
    tier: str,
    model_version: str,
    options: RenderOptions,
    answer: str | None = None,
) -> str:
    """`tier` and `model_version`: of the tier that renders (the loaded default while
    `options.tier` is None), so that a new model version under the same tier name misses.
    `answer`: what is sent back when it is not the rendered file (its contact markers)."""
    fields = sorted(dataclasses.asdict(options).items())
    params = ",".join(f"{name}={value}" for name, value in fields)
    if answer is not None:
        params += f",answer={answer}"
    return f"result:{LAYOUT}:{content_sha256}:{tier}:{model_version}:{params}"


def encode(result: RenderResult, body: bytes, fmt: str | None = None) -> bytes:
    header = json.dumps(
        {
            "format": fmt or result.format,
            "sample_rate": result.sample_rate,
            "duration_s": result.duration_s,
            "frames": result.frames,
            "tier": result.tier,
            "model_version": result.model_version,
            "gain_db": None if result.levelling is None else result.levelling.gain_db,
            "warnings": list(result.warnings),
        }
    ).encode()
    return len(header).to_bytes(_HEADER_LEN, "big") + header + body


def decode(value: bytes) -> CachedResult:
    """Raises ValueError for a value not in this layout."""
    view = memoryview(value)
    size = int.from_bytes(view[:_HEADER_LEN], "big")
    end = _HEADER_LEN + size
    if len(value) < end:
        raise ValueError(f"a {len(value)}-byte value announces a {size}-byte header")
    try:
        header = json.loads(bytes(view[_HEADER_LEN:end]))
        warnings = tuple(header.pop("warnings", ()))
        return CachedResult(**header, warnings=warnings, body=view[end:])
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a cached result: {exc}") from exc


def lookup(cache: Cache, key: str) -> CachedResult | None:
    value = cache.get(key)
    if value is None:
        return None
    try:
        return decode(value)
    except ValueError as exc:
        # Another writer, or a layout change without a LAYOUT bump: a miss, not a failed request.
        logger.warning("cache: unreadable result under %s (%s); rendering instead", key, exc)
        return None


def store(
    cache: Cache,
    key: str,
    result: RenderResult,
    *,
    max_item_bytes: int,
    answer: tuple[str, Path] | None = None,
) -> bool:
    """Read the rendered file (or the `answer`'s (format, file) sent instead) and keep it ->
    whether it was offered to the cache (which may still drop it). Larger files are not read at
    all; nor is anything while the store is not answering."""
    if not cache.healthy or cache.name == "none":
        return False
    fmt, path = answer or (result.format, result.output)
    if path.stat().st_size > max_item_bytes:
        return False
    value = encode(result, path.read_bytes(), fmt)
    if len(value) > max_item_bytes:
        return False
    cache.set(key, value)
    return True
