"""Typed options and results of one offline render; the transports build and read these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

OutputFormat = Literal["wav", "flac", "mp4", "mov", "mkv"]
AUDIO_FORMATS: frozenset[str] = frozenset({"wav", "flac"})
VIDEO_FORMATS: frozenset[str] = frozenset({"mp4", "mov", "mkv"})
SAMPLE_RATES: tuple[int, ...] = (48000, 44100, 24000, 16000)

ProgressFn = Callable[[float], None]


@dataclass(frozen=True)
class RenderOptions:
    format: OutputFormat
    sample_rate: int = 48000
    tier: str | None = None  # None: the service's default tier
    keep_original_audio: bool = False  # muxed outputs: also copy the input's audio streams


@dataclass
class ReuseStats:
    """What the pipeline caches saved in one render (service.pipeline.static, .memo), counted
    while it runs."""

    frames: int = 0  # model frames
    frames_static: int = 0  # not run through the encoder: static (forward-filled)
    frames_known: int = 0  # not run through the encoder: feature cache
    windows: int = 0  # generator + vocoder windows (window memo on; otherwise 0)
    windows_exact: int = 0  # reused: same features from the same state
    windows_template: int = 0  # reused: a motion template
    frames_recomputed: int = 0  # frames in windows the generator and vocoder ran on

    @property
    def windows_recomputed(self) -> int:
        return self.windows - self.windows_exact - self.windows_template


@dataclass(frozen=True)
class RenderResult:
    """What was rendered, echoing the options actually used."""

    output: Path
    format: OutputFormat
    sample_rate: int
    start_s: float  # presentation time of the first video frame; the track starts here
    duration_s: float  # the video's duration; the track has the same length
    frames: int  # decoded video frames
    tier: str
    model_version: str
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    reuse: ReuseStats = field(default_factory=ReuseStats)
    # Contact sounds the generator fired, in seconds from the track's start.
    events_s: tuple[float, ...] = ()
