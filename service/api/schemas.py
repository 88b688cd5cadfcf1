"""Wire schemas of the HTTP API: request parameters, error body, health answers."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.errors import Problem
from service.markers import MEDIA_TYPES as MARKER_MEDIA_TYPES
from service.media.loudness import MAX_LUFS, MIN_LUFS
from service.pipeline.types import (
    AUDIO_FORMATS,
    VIDEO_FORMATS,
    OutputFormat,
    RenderOptions,
    SampleRate,
)
from service.pipeline.types import DEFAULT_OPTIONS as DEFAULTS

# What /v1/foley may answer instead of the rendered file: its contact markers (service.markers),
# as the JSON document or an OpenTimelineIO timeline.
MarkersAnswer = Literal["events", "otio"]
MARKER_ANSWERS: dict[str, str] = {"events": "json", "otio": "otio"}  # answer -> file format

MEDIA_TYPES: dict[str, str] = {
    "wav": "audio/wav",
    "flac": "audio/flac",
    "mp4": "video/mp4",
    "mov": "video/quicktime",
    "mkv": "video/x-matroska",
    **{answer: MARKER_MEDIA_TYPES[fmt] for answer, fmt in MARKER_ANSWERS.items()},
}
assert set(MEDIA_TYPES) == AUDIO_FORMATS | VIDEO_FORMATS | set(MARKER_ANSWERS)


class FoleyParams(BaseModel):
    """Render parameters of `POST /v1/foley`, given as query parameters or multipart fields."""

    model_config = ConfigDict(frozen=True)

    format: OutputFormat | MarkersAnswer = Field(
        default=DEFAULTS.format,
        description="wav/flac: the Foley track; mp4/mov/mkv: the video with it; events: its "
        "contact markers as JSON; otio: an OpenTimelineIO timeline with them",
    )
    sample_rate: SampleRate = Field(
        default=DEFAULTS.sample_rate,  # type: ignore[arg-type]
        description="Output sample rate in Hz",
    )
    loudness: Annotated[float, Field(ge=MIN_LUFS, le=MAX_LUFS)] | Literal["off"] = Field(
        default=DEFAULTS.loudness if DEFAULTS.loudness is not None else "off",
        description="Integrated loudness of the track in LUFS (EBU R128; true peak under "
        "-1 dBTP), one gain for the whole render; `off`: the model's own level",
    )

    tier: str | None = Field(default=DEFAULTS.tier, min_length=1, description="Model tier (GET "
                             "/v1/tiers; default: the service's default tier)")  # fmt: skip
    replace_audio: bool = Field(
        default=DEFAULTS.replace_audio,
        description="mp4/mov/mkv: the Foley alone; by default the input's own audio tracks are "
        "kept, copied, and the Foley added as a track titled Foley",
    )

    def options(
        self, *, format: OutputFormat | None = None, tier: str | None = None
    ) -> RenderOptions:
        """The render these parameters ask for; `format`, `tier`: in place of theirs (a
        marker answer renders a track; a tier the request left out is resolved)."""
        return RenderOptions(
            format=format or self.format,  # type: ignore[arg-type]
            sample_rate=self.sample_rate,
            tier=tier or self.tier,
            replace_audio=self.replace_audio,
            loudness=None if self.loudness == "off" else self.loudness,
        )

    @field_validator("replace_audio", mode="before")
    @classmethod
    def _bool_as_written(cls, value: Any) -> Any:
        # JSON Schema's boolean, as text: "true" or "false". Pydantic alone would also take
        # "0", "off", "y"..., which the schema does not say.
        if isinstance(value, str):
            if value.lower() not in ("true", "false"):
                raise ValueError("must be true or false")
            return value.lower() == "true"
        return value

    @field_validator("sample_rate", mode="before")
    @classmethod
    def _rate_from_text(cls, value: Any) -> Any:
        # Query strings and form fields are text; Literal[48000] alone refuses "48000".
        if isinstance(value, str) and value.isdigit():
            return int(value)
        return value


class TierInfo(BaseModel):
    name: str
    kind: Literal["frames", "contacts", "motion"] = Field(
        description="frames: a model at a fixed frame rate; contacts: objects tracked at the "
        "video's own frame times, each contact rendered on its sample; motion: contacts read "
        "from the picture's motion at its own frame times, each rendered on its sample"
    )
    version: str
    default: bool = Field(description="What /v1/foley and the live preview use when not told")
    loaded: bool = Field(description="In memory now (others load on first use, in seconds)")
    size_bytes: int = Field(description="The tier's graphs and config on disk")


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable code")
    reason: str = Field(description="Human-readable explanation")


class ErrorResponse(BaseModel):
    """The body of every 4xx/5xx answer."""

    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class BackendStatus(BaseModel):
    name: Literal["cpu", "cuda", "tensorrt"] = Field(description="What runs the models")
    device: str = Field(description="The CPU, or the GPU's name")
    precision: dict[str, str] = Field(description="Each stage's float precision")
    memory_bytes: int | None = Field(default=None, description="Device memory held (GPU)")


class Ready(BaseModel):
    """Ready to render. `degraded`: a component below is not answering and renders go on
    without it; that component is named (absent while it is fine)."""

    status: Literal["ready", "degraded"] = "ready"
    tier: str
    model_version: str
    backend: BackendStatus
    cache: Literal["unavailable"] | None = Field(
        default=None, description="The cache store is not answering: nothing is reused"
    )
    jobs: Literal["unavailable"] | None = Field(
        default=None, description="The export queue's store is not answering: exports refused"
    )


def error_content(problem: Problem) -> dict[str, Any]:
    """The body of an error answer: the Problem as the wire writes it."""
    return ErrorResponse(error=ErrorBody(**asdict(problem))).model_dump()
