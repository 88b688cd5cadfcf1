"""One error value: a FoleyError carries its Problem, and each edge writes that same pair."""

from __future__ import annotations

from dataclasses import asdict

from service.api.schemas import error_content
from service.errors import InvalidInput, Problem
from service.jobs.records import JobRecord, new_job_id
from service.pipeline.types import RenderOptions
from service.preview.protocol import ErrorMessage


def test_each_edge_writes_the_problem_an_error_carries() -> None:
    problem = InvalidInput("the file is empty", code="empty_file").problem
    assert problem == Problem("empty_file", "the file is empty")
    assert error_content(problem) == {"error": asdict(problem)}
    message = ErrorMessage.model_validate_json(ErrorMessage(**asdict(problem)).model_dump_json())
    assert (message.code, message.reason) == (problem.code, problem.reason)
    record = JobRecord(new_job_id(), "t", RenderOptions(tier="motion"), error=problem)
    assert JobRecord.from_fields(record.to_fields()).error == problem
