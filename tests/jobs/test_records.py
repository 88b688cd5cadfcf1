"""Job records: one RenderOptions each, checked again when read back from the store."""

from __future__ import annotations

import pytest

from service.errors import InvalidInput
from service.jobs.records import JobRecord, new_job_id
from service.pipeline.types import RenderOptions


def _record(options: RenderOptions) -> JobRecord:
    return JobRecord(id=new_job_id(), tenant="t", options=options)


def test_a_job_record_keeps_its_options_whole_through_its_store_fields() -> None:
    record = _record(RenderOptions(format="flac", tier="motion", loudness=None))
    assert JobRecord.from_fields(record.to_fields()) == record


def test_a_stored_record_with_an_option_out_of_range_is_refused_when_read() -> None:
    fields = _record(RenderOptions(tier="motion")).to_fields()
    fields["options"]["sample_rate"] = 12345
    with pytest.raises(InvalidInput, match="sample_rate"):
        JobRecord.from_fields(fields)


def test_a_record_stored_with_flat_options_reads_as_the_same_options() -> None:
    record = _record(RenderOptions(format="mov", tier="motion", loudness=-16.0))
    flat = {k: v for k, v in record.to_fields().items() if k != "options"}
    flat |= {"format": "mov", "sample_rate": 48000, "tier": "motion", "loudness_lufs": -16.0}
    assert JobRecord.from_fields(flat) == record
    assert JobRecord.from_fields(flat | {"loudness_lufs": None}).options.loudness is None


def test_a_job_names_its_tier() -> None:
    with pytest.raises(ValueError, match="tier"):
        _record(RenderOptions())
