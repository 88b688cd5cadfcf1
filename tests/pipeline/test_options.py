"""RenderOptions: every option's default and range in one place, checked whoever builds it."""

from __future__ import annotations

import pytest

from service.errors import InvalidInput
from service.media.loudness import MAX_LUFS, MIN_LUFS
from service.pipeline.types import DEFAULT_OPTIONS, SAMPLE_RATES, RenderOptions


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"format": "mp3"}, "invalid_parameter"),
        ({"sample_rate": 22050}, "invalid_sample_rate"),
        ({"sample_rate": 48000.0}, "invalid_sample_rate"),
        ({"sample_rate": True}, "invalid_sample_rate"),
        ({"tier": ""}, "invalid_parameter"),
        ({"replace_audio": "yes"}, "invalid_parameter"),
        ({"loudness": MIN_LUFS - 0.1}, "invalid_parameter"),
        ({"loudness": MAX_LUFS + 0.1}, "invalid_parameter"),
        ({"loudness": float("nan")}, "invalid_parameter"),
        ({"loudness": "loud"}, "invalid_parameter"),
    ],
)
def test_an_option_out_of_its_range_is_refused_with_a_code(change: dict, code: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        RenderOptions(**change)
    assert refused.value.code == code
    assert next(iter(change)) in refused.value.reason


def test_the_range_ends_and_every_rate_are_taken() -> None:
    assert RenderOptions(loudness=MIN_LUFS).loudness == MIN_LUFS
    assert RenderOptions(loudness=-14).loudness == -14.0
    assert isinstance(RenderOptions(loudness=-14).loudness, float)
    assert [RenderOptions(sample_rate=r).sample_rate for r in SAMPLE_RATES] == list(SAMPLE_RATES)
    assert RenderOptions(loudness=None).loudness is None


def test_the_wire_form_writes_loudness_off_and_reads_it_back() -> None:
    off = RenderOptions(format="mp4", tier="motion", loudness=None, replace_audio=True)
    wire = off.to_wire()
    assert wire == {
        "format": "mp4",
        "sample_rate": 48000,
        "tier": "motion",
        "replace_audio": True,
        "loudness": "off",
    }
    assert RenderOptions.from_wire(wire) == off
    assert RenderOptions.from_wire({}) == DEFAULT_OPTIONS
