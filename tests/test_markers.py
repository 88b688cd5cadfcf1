"""Contact markers (service.markers): JSON, CSV and OpenTimelineIO say the same thing, on the
video's timeline, with SMPTE timecodes at its rate."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import opentimelineio as otio
import pytest

from service.markers import (
    MarkersDocument,
    markers_document,
    render_markers,
    timecode,
    timecode_rate,
)
from service.pipeline.types import ContactMarker, RenderOptions, RenderResult

MARKERS = (
    ContactMarker(0.5, "impact", 0.12, "metal"),
    ContactMarker(1.25),
    ContactMarker(2.0625, "impact", 0.031, "glass"),
)


def result(start_s: float = 3600.0, fps: float = 25.0) -> RenderResult:
    return RenderResult(Path("clip.foley.wav"), RenderOptions(tier="objects"), start_s, 4.0, 100,
                        "0.2.0", markers=MARKERS, video_fps=fps)  # fmt: skip


@pytest.mark.parametrize(
    ("fps", "seconds", "expected"),
    [
        (25.0, 3723.52, "01:02:03:13"),
        (60.0, 1.5, "00:00:01:30"),
        (30000 / 1001, 1800 * 1001 / 30000, "00:01:00;02"),  # drop-frame skips ;00 and ;01
        (24000 / 1001, 86400 * 1001 / 24000, "01:00:00:00"),  # 23.976 counts 24 a second
        (29.97, 0.0, "00:00:00;00"),  # a stream's average rate, rounded to its SMPTE rate
    ],
)
def test_timecodes_count_at_the_videos_own_rate(fps: float, seconds: float, expected: str) -> None:
    rate, drop = timecode_rate(fps)
    assert timecode(seconds, rate, drop) == expected


def test_times_are_on_the_videos_timeline() -> None:
    document = markers_document(result(start_s=10.0), video_name="clip.mp4", audio_name="a.wav")
    assert [c.time_s for c in document.contacts] == [10.5, 11.25, 12.0625]
    assert [c.timecode for c in document.contacts] == ["00:00:10:12", "00:00:11:06", "00:00:12:01"]
    assert document.contacts[0].material == "metal" and document.contacts[1].strength is None


@pytest.mark.parametrize("fps", [24000 / 1001, 25.0, 30000 / 1001, 60.0])
def test_json_csv_and_otio_say_the_same(fps: float) -> None:
    document = markers_document(result(fps=fps), video_name="clip.mp4", audio_name="a.wav")
    again = MarkersDocument.model_validate_json(render_markers(document, "json"))
    assert again == document
    rows = list(csv.DictReader(io.StringIO(render_markers(document, "csv"))))
    assert [(float(r["time_s"]), r["timecode"], r["material"] or None) for r in rows] == [
        (c.time_s, c.timecode, c.material) for c in document.contacts
    ]
    timeline = otio.adapters.read_from_string(render_markers(document, "otio"), "otio_json")
    assert [t.kind for t in timeline.tracks] == ["Video", "Audio"]
    (video,) = timeline.video_tracks()[0].find_clips()
    (foley,) = timeline.audio_tracks()[0].find_clips()
    assert (video.media_reference.target_url, foley.media_reference.target_url) == (
        "clip.mp4", "a.wav",
    )  # fmt: skip
    markers = timeline.tracks.markers
    start = timeline.global_start_time
    assert [(start + m.marked_range.start_time).to_seconds() for m in markers] == pytest.approx(
        [c.time_s for c in document.contacts], abs=1e-9
    )
    assert [dict(m.metadata["foley"]) for m in markers] == [
        c.model_dump() for c in document.contacts
    ]
    assert otio.opentime.to_timecode(start, document.video.timecode_fps) == timecode(
        document.video.start_s, document.video.timecode_fps, document.video.drop_frame
    )
