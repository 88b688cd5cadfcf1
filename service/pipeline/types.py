"""Typed options and results of one offline render; the transports build and read these."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args

from service.errors import InvalidInput
from service.media.loudness import DEFAULT_TARGET_LUFS, MAX_LUFS, MIN_LUFS, Levelling

OutputFormat = Literal["wav", "flac", "mp4", "mov", "mkv"]
OUTPUT_FORMATS: tuple[str, ...] = get_args(OutputFormat)
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
    """What one render is asked for. Each option's default and range is stated here, once, and
    checked when an instance is built, whoever builds it (the CLI, the HTTP routes, an export
    record read back from its store, engines and bench): a value out of range is InvalidInput,
    code `invalid_parameter` (`invalid_sample_rate` for the rate). The wire names are these
    names, `loudness` written `off` where it is None (`to_wire`, `from_wire`)."""

    format: OutputFormat = "wav"
    sample_rate: int = 48000  # one of SAMPLE_RATES
    tier: str | None = None  # None: the service's default tier
    replace_audio: bool = False  # muxed outputs: the Foley alone, the input's own audio left out
    # The track's integrated loudness in LUFS (EBU R128, true peak under -1 dBTP), one gain for
    # the whole render (service.media.loudness), MIN_LUFS to MAX_LUFS; None: the model's level.
    loudness: float | None = DEFAULT_TARGET_LUFS

    def __post_init__(self) -> None:
        if self.format not in OUTPUT_FORMATS:
            _refuse(f"format must be one of {', '.join(OUTPUT_FORMATS)}, not {self.format!r}")
        if type(self.sample_rate) is not int or self.sample_rate not in SAMPLE_RATES:
            rates = ", ".join(map(str, SAMPLE_RATES))
            _refuse(f"sample_rate must be one of {rates} Hz", "invalid_sample_rate")
        if self.tier is not None and not (isinstance(self.tier, str) and len(self.tier) > 0):
            _refuse("tier must be a tier's name")
        if not isinstance(self.replace_audio, bool):
            _refuse("replace_audio must be true or false")
        if self.loudness is not None:
            good = isinstance(self.loudness, int | float) and not isinstance(self.loudness, bool)
            if not (good and MIN_LUFS <= self.loudness <= MAX_LUFS):
                _refuse(f"loudness must be {MIN_LUFS:g} to {MAX_LUFS:g} LUFS, or off")
            object.__setattr__(self, "loudness", float(self.loudness))

    def to_wire(self) -> dict[str, Any]:
        """As the API and the job store write it."""
        return {**asdict(self), "loudness": "off" if self.loudness is None else self.loudness}

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> RenderOptions:
        values = dict(raw)
        if values.get("loudness") == "off":
            values["loudness"] = None
        return cls(**values)


DEFAULT_OPTIONS = RenderOptions()


def output_name(stem: str, extension: str) -> str:
    """What a render of the video `stem` is called, however it was asked for (the CLI's output
    beside its input, the API's download): `clip` -> `clip.foley.wav`."""
    return f"{stem}.foley.{extension}"


def _refuse(reason: str, code: str = "invalid_parameter") -> NoReturn:
    raise InvalidInput(reason, code=code)


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
    """What was rendered: the options it was rendered with (the tier named, never None)."""

    output: Path
    options: RenderOptions
    start_s: float  # presentation time of the first video frame; the track starts here
    duration_s: float  # the video's duration; the track has the same length
    frames: int  # decoded video frames
    model_version: str
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    reuse: ReuseStats = field(default_factory=ReuseStats)
    markers: tuple[ContactMarker, ...] = ()  # the contact sounds the model fired, in time order
    levelling: Levelling | None = None  # the gain applied (None: loudness off)
    video_fps: float = 0.0  # the video's average frame rate (0: unknown), for timecodes
    # What was wrong with the file and worked around: skipped packets, a file cut short.
    warnings: tuple[str, ...] = ()

    @property
    def format(self) -> OutputFormat:
        return self.options.format

    @property
    def sample_rate(self) -> int:
        return self.options.sample_rate

    @property
    def tier(self) -> str:
        assert self.options.tier is not None
        return self.options.tier

    @property
    def events_s(self) -> tuple[float, ...]:
        """When each impact's attack is, in seconds from the track's start (rolling and
        sliding fade in: their markers say when the motion began, not where a sound attacks)."""
        return tuple(m.time_s for m in self.markers if m.kind == "impact")
