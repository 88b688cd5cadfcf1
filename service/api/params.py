"""The render parameters of an upload route, and the names of what it takes and gives: the
OpenAPI body (the file and the parameters as form fields), query parameters and form fields
merged into one model, the upload's name on disk, the answer's download name. Shared by
`/v1/foley` (routes) and `/v1/exports` (exports)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from service.api.schemas import MARKER_ANSWERS, FoleyParams
from service.api.uploads import FILE_FIELD
from service.errors import InvalidInput, validation_reason
from service.pipeline.types import output_name

P = TypeVar("P", bound=FoleyParams)
_UPLOAD = {"type": "string", "format": "binary", "minLength": 1}  # an empty file is refused
UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
# The upload's name on disk. No extension, and never the client's: FFmpeg picks demuxers partly
# by extension, and its HLS demuxer (which follows playlist URLs) refuses files not named .m3u8.
UPLOAD_NAME = "upload"


def upload_body(params: type[FoleyParams]) -> dict[str, Any]:
    """The OpenAPI request body of an upload route: its `file`, and the parameters `params`
    takes, which may come as form fields as well as query parameters (a form field overrides
    the query parameter of its name). The body is streamed by hand (service.api.uploads), so
    FastAPI cannot derive its schema."""
    return {
        "requestBody": {
            "required": True,
            "description": f"The video as the multipart field `{FILE_FIELD}`; the options as "
            "form fields or query parameters (a form field overrides the query parameter of its "
            "name).",
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": [FILE_FIELD],
                        "properties": {
                            FILE_FIELD: _UPLOAD,
                            **_form_fields(params),
                        },
                        # Unknown fields are refused (a misspelt option must not pass silently).
                        "additionalProperties": False,
                    }
                }
            },
        }
    }


def _form_fields(params: type[FoleyParams]) -> dict[str, dict[str, Any]]:
    """The parameters' schemas as form fields: a field holds text, so an option left to its
    default is a field not sent, never a null."""
    fields = {}
    for name, schema in params.model_json_schema()["properties"].items():
        if "anyOf" in schema:
            kept = [s for s in schema["anyOf"] if s.get("type") != "null"]
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
            schema = {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}
        fields[name] = schema
    return fields


def merge_params(query: P, fields: Mapping[str, str]) -> P:
    """Query parameters and form fields together (into the query's model); a form field
    overrides the query parameter of its name."""
    given = query.model_dump(include=query.model_fields_set)
    try:
        return type(query).model_validate({**given, **fields})
    except ValidationError as exc:
        errors = [{**e, "loc": ("form", *e["loc"])} for e in exc.errors()]
        raise InvalidInput(validation_reason(errors), code="invalid_parameter") from exc


def download_name(filename: str | None, fmt: str) -> str:
    """`holiday clip.mov` -> `holiday_clip.foley.wav`; only safe characters reach the header."""
    stem = UNSAFE_NAME.sub("_", Path(filename or "").stem).strip("._")[:100]
    return output_name(stem or "clip", MARKER_ANSWERS.get(fmt, fmt))
