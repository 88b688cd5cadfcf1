"""Contact markers for an editor's timeline: a render's contacts as JSON, CSV or OpenTimelineIO.

    document = markers_document(result, video_name="clip.mp4", audio_name="clip.foley.wav")
    write_markers(Path("clip.foley.otio"), document)      # .json, .csv or .otio

Times are on the video's own timeline: the first frame's presentation time (the video's start
offset) plus the contact's time in the track. Timecodes are SMPTE at the video's frame rate
(the nearest SMPTE rate to its average; 29.97 and 59.94 as drop-frame), the frame the contact
falls in, formatted by OpenTimelineIO.

JSON (`MarkersDocument`, version 1): the video (file, timecode rate, drop-frame, start offset,
duration), the Foley track's file, the tier and model version, and one entry per contact: time
in seconds, timecode, kind (`impact`, or where rolling or sliding starts and ends:
`roll_start` ... `roll_end`, `slide_start` ... `slide_end`), strength (the impulse in N s the
tier voiced it at, or null)
and material (or null). CSV: the contacts' columns, one row each. OpenTimelineIO: a timeline
with the source clip on a video track and the Foley track on an audio track, starting at the
video's start timecode, and a marker per contact (one frame long; the entry's fields under
`metadata["foley"]`).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Literal, cast

import opentimelineio as otio
from opentimelineio.opentime import RationalTime, TimeRange
from pydantic import BaseModel, Field

from service.errors import InvalidInput
from service.pipeline.types import MarkerKind, RenderResult

MARKER_FORMATS = ("json", "csv", "otio")
MEDIA_TYPES = {
    "json": "application/json",
    "otio": "application/vnd.opentimelineio+json",
    "csv": "text/csv",
}
FALLBACK_FPS = 30.0  # a video that states no frame rate: timecodes at 30 fps
DROP_FRAME_RATES = (30000 / 1001, 60000 / 1001)  # 29.97 and 59.94 count drop-frame
_COLOURS = {"impact": otio.schema.MarkerColor.RED}
CSV_COLUMNS = ("time_s", "timecode", "kind", "strength", "material")


class Contact(BaseModel):
    time_s: float = Field(description="Seconds on the video's timeline, its start offset included")
    timecode: str = Field(description="SMPTE timecode of the frame the contact falls in")
    kind: MarkerKind
    strength: float | None = Field(description="Impulse voiced, N s (null: not estimated)")
    material: str | None = Field(description="Material voiced (null: not told apart)")


class Video(BaseModel):
    file: str | None
    timecode_fps: float = Field(description="The SMPTE rate the timecodes count")
    drop_frame: bool
    start_s: float = Field(description="The first frame's presentation time")
    duration_s: float


class MarkersDocument(BaseModel):
    version: Literal[1] = 1
    video: Video
    audio_file: str | None = Field(description="The Foley track these contacts are in")
    tier: str
    model_version: str
    contacts: list[Contact]


def timecode_rate(fps: float) -> tuple[float, bool]:
    """(the SMPTE rate timecodes count at, whether drop-frame) for a video's average rate."""
    rate = RationalTime.nearest_smpte_timecode_rate(fps if fps > 0 else FALLBACK_FPS)
    return rate, any(math.isclose(rate, r) for r in DROP_FRAME_RATES)


def timecode(seconds: float, rate: float, drop_frame: bool) -> str:
    frame = RationalTime(math.floor(seconds * rate + 1e-6), rate)
    return cast(str, otio.opentime.to_timecode(frame, rate, drop_frame))  # otio is untyped


def markers_document(
    result: RenderResult, *, video_name: str | None, audio_name: str | None
) -> MarkersDocument:
    rate, drop = timecode_rate(result.video_fps)
    contacts = [
        Contact(
            time_s=result.start_s + m.time_s,
            timecode=timecode(result.start_s + m.time_s, rate, drop),
            kind=m.kind,
            strength=m.strength,
            material=m.material,
        )
        for m in result.markers
    ]
    return MarkersDocument(
        video=Video(
            file=video_name,
            timecode_fps=rate,
            drop_frame=drop,
            start_s=result.start_s,
            duration_s=result.duration_s,
        ),
        audio_file=audio_name,
        tier=result.tier,
        model_version=result.model_version,
        contacts=contacts,
    )


def marker_format(path: Path) -> str:
    """The markers format a file name asks for; InvalidInput for any other."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in MARKER_FORMATS:
        known = ", ".join(f".{f}" for f in MARKER_FORMATS)
        raise InvalidInput(
            f"{path}: unknown markers extension {path.suffix!r} (use {known})",
            code="unsupported_format",
        )
    return suffix


def render_markers(document: MarkersDocument, fmt: str) -> str:
    """The document as the text of a .json, .csv or .otio file."""
    if fmt == "json":
        return document.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for contact in document.contacts:
            writer.writerow(contact.model_dump())
        return out.getvalue()
    if fmt == "otio":
        return cast(str, otio.adapters.write_to_string(timeline(document), "otio_json"))
    raise ValueError(f"markers format must be one of {MARKER_FORMATS}, not {fmt!r}")


def write_markers(path: Path, document: MarkersDocument) -> None:
    path.write_text(render_markers(document, marker_format(path)))


def timeline(document: MarkersDocument) -> otio.schema.Timeline:
    video, rate = document.video, document.video.timecode_fps
    start = RationalTime.from_seconds(video.start_s, rate)
    length = RationalTime.from_seconds(video.duration_s, rate)
    result = otio.schema.Timeline(name=Path(video.file or "clip").stem, global_start_time=start)
    source = otio.schema.Clip(
        name=video.file or "clip",
        media_reference=otio.schema.ExternalReference(
            target_url=video.file or "", available_range=TimeRange(start, length)
        ),
        source_range=TimeRange(start, length),
    )
    foley = otio.schema.Clip(
        name="Foley",
        media_reference=otio.schema.ExternalReference(
            target_url=document.audio_file or "",
            available_range=TimeRange(RationalTime(0, rate), length),
        ),
        source_range=TimeRange(RationalTime(0, rate), length),
    )
    result.tracks.append(otio.schema.Track(name="Video", kind="Video", children=[source]))
    result.tracks.append(otio.schema.Track(name="Foley", kind="Audio", children=[foley]))
    for contact in document.contacts:
        at = RationalTime.from_seconds(contact.time_s - video.start_s, rate)
        name = " ".join(x for x in (contact.material, contact.kind) if x)
        result.tracks.markers.append(
            otio.schema.Marker(
                name=name,
                marked_range=TimeRange(at, RationalTime(1, rate)),
                color=_COLOURS.get(contact.kind, otio.schema.MarkerColor.ORANGE),
                metadata={"foley": contact.model_dump()},
            )
        )
    return result
