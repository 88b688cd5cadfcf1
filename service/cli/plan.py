"""What `foley generate` renders where: each input video (or the videos in a folder, by their
extension) and the output it gets.

    plan = plan_batch(inputs, output=None, fmt=None, events=None, force=False)   # checks only
    ... load the engine once, then render each job of the plan (service.cli.generate)

Planning comes first and loads no model, so a mistake costs a fraction of a second: every input
exists (whether it is a video, the isolated decoder's probe says next, as for an upload), every
output is named
(`<input>.foley.<ext>` beside the input, or in the `-o` folder) and is neither the input nor an
existing file unless forced. Every error names its file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from service.errors import InvalidInput
from service.markers import MARKER_FORMATS, marker_format, markers_document, write_markers
from service.pipeline.types import (
    AUDIO_FORMATS,
    VIDEO_FORMATS,
    OutputFormat,
    RenderResult,
    output_name,
)

FORMATS = AUDIO_FORMATS | VIDEO_FORMATS
VIDEO_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"})


@dataclass(frozen=True)
class Job:
    input: Path
    output: Path
    format: OutputFormat
    events: Path | None = None


def plan_batch(
    inputs: list[Path],
    *,
    output: Path | None,
    fmt: str | None,
    events: str | None,
    force: bool,
) -> list[Job]:
    """One job per video of `inputs` (folders: the videos directly in them, by name), checked."""
    videos = [video for given in inputs for video in _videos(given)]
    if not videos:
        raise InvalidInput("no video files in " + ", ".join(map(str, inputs)), code="no_inputs")
    folder = output if output is not None and (output.is_dir() or len(videos) > 1) else None
    if output is not None and folder is None:  # one video, one named output file
        jobs = [Job(videos[0], output, _format_of(output, fmt))]
    else:
        if folder is not None and not folder.is_dir():
            raise InvalidInput(
                f"{folder}: not a folder (several inputs need -o to name one)",
                code="output_dir_not_found",
            )
        chosen = _format_of(Path(f"x.{fmt or 'wav'}"), None)
        jobs = [Job(v, (folder or v.parent) / output_name(v.stem, chosen), chosen) for v in videos]
    jobs = [_with_events(job, events, len(jobs)) for job in jobs]
    _check_outputs(jobs, force)
    return jobs


def write_events(job: Job, result: RenderResult) -> None:
    """The render's contacts beside it, naming the video and the track relative to the file."""
    assert job.events is not None
    at = job.events.resolve().parent

    def relative(p: Path) -> str:
        return os.path.relpath(p.resolve(), at)

    document = markers_document(
        result, video_name=relative(job.input), audio_name=relative(job.output)
    )
    with staged(job.events) as staging:
        write_markers(staging, document)


@contextmanager
def staged(output: Path) -> Iterator[Path]:
    """Write beside `output` and rename into place: a failed write leaves no partial file."""
    # Not mkstemp: its 0600 mode would survive the rename.
    staging = output.with_name(f".{output.stem}.{secrets.token_hex(4)}.partial{output.suffix}")
    try:
        yield staging
        os.replace(staging, output)
    finally:
        staging.unlink(missing_ok=True)


def _videos(given: Path) -> list[Path]:
    if given.is_dir():
        return sorted(
            p for p in given.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file()
        )
    if not given.is_file():
        raise InvalidInput(f"{given}: no such file", code="input_not_found")
    return [given]  # whether it is a video, the decoder's probe says (service.media.source)


def _format_of(path: Path, fmt: str | None) -> OutputFormat:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        known = ", ".join(f".{f}" for f in sorted(FORMATS))
        raise InvalidInput(
            f"{path}: unknown output extension {path.suffix!r} (use {known})",
            code="unsupported_format",
        )
    if fmt is not None and fmt != suffix:
        raise InvalidInput(f"{path}: --format {fmt} but the name says .{suffix}", code="conflict")
    return cast(OutputFormat, suffix)


def _with_events(job: Job, events: str | None, jobs: int) -> Job:
    if events is None:
        return job
    if events in MARKER_FORMATS:  # a format: beside each output
        return replace(job, events=job.output.with_suffix(f".{events}"))
    if jobs > 1:
        raise InvalidInput(
            f"--events {events}: several inputs take a format (json, csv or otio), not a file",
            code="invalid_parameter",
        )
    path = Path(events)
    marker_format(path)
    return replace(job, events=path)


def _check_outputs(jobs: list[Job], force: bool) -> None:
    seen: set[Path] = set()
    for job in jobs:
        for path in (job.output, job.events):
            if path is None:
                continue
            if not path.parent.is_dir():
                raise InvalidInput(f"{path.parent}: no such directory", code="output_dir_not_found")
            if path.resolve() == job.input.resolve():
                raise InvalidInput(
                    f"{path}: is the input; name another output", code="output_is_input"
                )
            if path.resolve() in seen:
                raise InvalidInput(f"{path}: written twice by this command", code="output_clash")
            seen.add(path.resolve())
            if path.exists() and not force:
                raise InvalidInput(f"{path}: exists (--force overwrites it)", code="output_exists")
