"""Keys and values of the result cache (service.api.results)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from service.api import results
from service.cache import MemoryCache, NoCache
from service.pipeline.types import RenderOptions, RenderResult

SHA = "ab" * 32


def rendered(tmp_path: Path, body: bytes = b"RIFF wav bytes") -> RenderResult:
    output = tmp_path / "foley.wav"
    output.write_bytes(body)
    return RenderResult(
        output=output, options=RenderOptions(tier="preview"), start_s=0.0, duration_s=2.5,
        frames=75, model_version="0.1.0", timings={"total": 0.3},
    )  # fmt: skip


def test_every_render_option_is_part_of_the_key() -> None:
    base = RenderOptions(format="wav")
    changed = {
        "format": "flac",
        "sample_rate": 16000,
        "tier": "other",
        "replace_audio": True,
        "loudness": None,
    }
    fields = {f.name for f in dataclasses.fields(RenderOptions)}
    assert set(changed) == fields, "a new RenderOptions field: give it another value here"
    key = results.result_key(SHA, "preview", "0.1.0", base)
    others = {
        results.result_key(SHA, "preview", "0.1.0", dataclasses.replace(base, **{name: value}))
        for name, value in changed.items()
    }
    assert key not in others and len(others) == len(changed)


def test_the_content_tier_and_version_are_part_of_the_key() -> None:
    options = RenderOptions(format="wav")
    keys = {
        results.result_key(SHA, "preview", "0.1.0", options),
        results.result_key("cd" * 32, "preview", "0.1.0", options),
        results.result_key(SHA, "export", "0.1.0", options),
        results.result_key(SHA, "preview", "0.2.0", options),
    }
    assert len(keys) == 4


def test_a_stored_result_reads_back_with_what_the_response_needs(tmp_path: Path) -> None:
    cache = MemoryCache(1024**2)
    assert results.store(cache, "k", rendered(tmp_path), max_item_bytes=1024)
    cached = results.lookup(cache, "k")
    assert cached is not None
    assert bytes(cached.body) == b"RIFF wav bytes"
    assert (cached.format, cached.sample_rate, cached.duration_s, cached.frames) == (
        "wav", 48000, 2.5, 75,
    )  # fmt: skip
    assert (cached.tier, cached.model_version) == ("preview", "0.1.0")


UNREADABLE = {
    "empty": b"",
    "short_length": b"\x00\x00",
    "header_past_the_end": b"\x00\x00\x10\x00{}",
    "header_not_an_object": b"\x00\x00\x00\x02[]body",
    "header_not_json": b"\x00\x00\x00\x02{x",
    "header_missing_fields": b"\x00\x00\x00\x02{}body",
}


@pytest.mark.parametrize("value", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_value_is_a_logged_miss(
    value: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    cache = MemoryCache(1024)
    cache.set("k", value)
    with caplog.at_level(logging.WARNING, logger="service.api.results"):
        assert results.lookup(cache, "k") is None
    assert "unreadable result" in caplog.text


def test_a_file_over_the_item_limit_is_not_read(tmp_path: Path) -> None:
    cache = MemoryCache(1024**2)
    result = rendered(tmp_path, b"x" * 100)
    assert not results.store(cache, "k", result, max_item_bytes=99)
    assert not results.store(cache, "k", result, max_item_bytes=100)  # with its header, over
    assert len(cache) == 0


def test_nothing_is_read_for_no_cache(tmp_path: Path) -> None:
    result = rendered(tmp_path)
    result.output.unlink()  # reading it would raise
    assert not results.store(NoCache(), "k", result, max_item_bytes=1024)
