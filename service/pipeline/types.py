"""Typed options and results of one offline render; the transports build and read these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from service.media.loudness import DEFAULT_TARGET_LUFS, Levelling

OutputFormat = Literal["wav", "flac", "mp4", "mov", "mkv"]
AUDIO_FORMATS: frozenset[str] = frozenset({"wav", "flac"})
VIDEO_FORMATS: frozenset[str] = frozenset({"mp4", "mov", "mkv"})
SampleRate = Literal[48000, 44100, 24000, 16000]  # the output rates every way out offers
SAMPLE_RATES: tuple[int, ...] = get_args(SampleRate)

ProgressFn = Callable[[float], None]


MarkerKind = Literal["impact", "roll_start", "roll_end", "slide_start", "slide_end"]


@dataclass(frozen=True)
class ContactMarker:
    """A contact the model voiced: seconds from the track's start (the first frame), its kind,
    the impulse it was voiced at (N s, as the tier estimates it; None where the tier has no
    such estimate) and its material (None where the tier does not tell materials apart)."""

    time_s: float
    kind: MarkerKind = "impact"
    strength: float | None = None
    material: str | None = None


@dataclass(frozen=True)
class RenderOptions:
    format: OutputFormat
    sample_rate: int = 48000
    tier: str | None = None  # None: the service's default tier
    replace_audio: bool = False  # muxed outputs: the Foley alone, the input's own audio left out
    # The track's integrated loudness (EBU R128), one gain for the whole render
    # (service.media.loudness); None: the model's own level.
    loudness_lufs: float | None = DEFAULT_TARGET_LUFS


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
    markers: tuple[ContactMarker, ...] = ()  # the contact sounds the model fired, in time order
    levelling: Levelling | None = None  # the gain applied (None: loudness off)
    video_fps: float = 0.0  # the video's average frame rate (0: unknown), for timecodes
    # What was wrong with the file and worked around: skipped packets, a file cut short.
    warnings: tuple[str, ...] = ()

    @property
    def events_s(self) -> tuple[float, ...]:
        """When each impact's attack is, in seconds from the track's start (rolling and
        sliding fade in: their markers say when the motion began, not where a sound attacks)."""
        return tuple(m.time_s for m in self.markers if m.kind == "impact")
