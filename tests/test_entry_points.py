"""Every way in takes the render options RenderOptions states, with its names, defaults and
ranges: the CLI's `generate`, `POST /v1/foley`, `POST /v1/exports` (and the job it answers), and
the live preview's config for the options a stream has. An option added to RenderOptions, or a
default changed there, fails here until every entry point follows."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from service import cli
from service.api import create_app
from service.api.exports import ExportJob, ExportParams
from service.api.schemas import FoleyParams
from service.config import Settings
from service.media.loudness import MAX_LUFS, MIN_LUFS
from service.pipeline.types import DEFAULT_OPTIONS, OUTPUT_FORMATS, SAMPLE_RATES, RenderOptions
from service.preview.protocol import SessionConfig

OPTIONS = [f.name for f in dataclasses.fields(RenderOptions)]
WIRE_DEFAULTS = DEFAULT_OPTIONS.to_wire()
# A live stream is PCM at the tier's live gain (its own level setting, `gain_db`), never a file.
NOT_LIVE = {"format", "replace_audio", "loudness"}


def _generate() -> dict[str, argparse.Action]:
    parser = cli._parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in commands.choices["generate"]._actions}


def test_the_cli_takes_every_option_by_its_name_with_its_default_and_range() -> None:
    actions = _generate()
    for name in OPTIONS:
        assert f"--{name.replace('_', '-')}" in actions[name].option_strings, name
    assert actions["sample_rate"].default == DEFAULT_OPTIONS.sample_rate
    assert tuple(actions["sample_rate"].choices) == SAMPLE_RATES
    assert actions["tier"].default == DEFAULT_OPTIONS.tier
    assert actions["replace_audio"].default == DEFAULT_OPTIONS.replace_audio
    assert actions["loudness"].default == DEFAULT_OPTIONS.loudness
    # The format is the output's extension, else --format, else RenderOptions' default.
    assert actions["format"].default is None
    assert sorted(actions["format"].choices) == sorted(OUTPUT_FORMATS)
    loudness = actions["loudness"].type
    assert loudness(str(MIN_LUFS)) == MIN_LUFS and loudness("off") is None
    for outside in (MIN_LUFS - 0.5, MAX_LUFS + 0.5):
        with pytest.raises(argparse.ArgumentTypeError):
            loudness(str(outside))


@pytest.mark.parametrize("params", [FoleyParams, ExportParams])
def test_the_upload_routes_take_every_option_by_its_name_with_its_default_and_range(
    params,
) -> None:
    fields = params.model_json_schema()["properties"]
    for name in OPTIONS:
        assert fields[name].get("default") == WIRE_DEFAULTS[name], name
    assert fields["sample_rate"]["enum"] == list(SAMPLE_RATES)
    formats = [e for s in fields["format"].get("anyOf", [fields["format"]]) for e in s["enum"]]
    assert set(OUTPUT_FORMATS) <= set(formats)
    ranged = next(s for s in fields["loudness"]["anyOf"] if s.get("type") == "number")
    assert (ranged["minimum"], ranged["maximum"]) == (MIN_LUFS, MAX_LUFS)
    assert {"const": "off", "type": "string"} in fields["loudness"]["anyOf"]


def test_the_published_routes_and_the_job_answer_use_the_same_names() -> None:
    spec = create_app(Settings()).openapi()
    for path in ("/v1/foley", "/v1/exports"):
        query = {p["name"] for p in spec["paths"][path]["post"]["parameters"]}
        assert set(OPTIONS) <= query, path
    assert set(OPTIONS) <= set(ExportJob.model_fields)


def test_the_live_config_takes_the_options_a_stream_has_with_the_same_defaults() -> None:
    fields = SessionConfig.model_json_schema()["properties"]
    for name in set(OPTIONS) - NOT_LIVE:
        assert fields[name].get("default") == WIRE_DEFAULTS[name], name
    assert fields["sample_rate"]["enum"] == list(SAMPLE_RATES)
    assert not NOT_LIVE & set(fields)
