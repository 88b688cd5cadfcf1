"""Put the Foley track into a copy of the uploaded video: video stream-copied, Foley encoded as AAC.

    video (any allowed container) + Foley (mono, sample 0 = the first video frame at `start_s`)
    -> mp4 / mov / mkv: [video copy, the input's own audio streams copied (none with
       `replace_audio`), Foley AAC titled "Foley", language unset]

`FoleyMuxer` takes the track in chunks as the pipeline makes them: each chunk is encoded at once
and the input's packets are copied up to where the track has reached, so muxing overlaps with
inference instead of following it.

The Foley track starts exactly at `start_s`. The AAC encoder delays its output by `priming`
samples (first packet pts = -1024); Matroska stores that as CodecDelay by itself, MP4/MOV need
`mp4_edits.set_track_edit` (see there). `movie_timescale` is a common multiple of the video's and
the track's rates, so edit lists are exact rather than rounded to FFmpeg's default 1/1000 s.

Copied packets keep their timestamps unless the output cannot store them: a decode time that
goes back or (MP4/MOV) repeats, or comes after its presentation time, is moved forward the way
FFmpeg's own command line does it, and `notes` says how many were moved. Players then show those
frames a little later than the source file says; refusing the file would give no video at all.

Memory is bounded: packets are copied one at a time, the track waits in at most one AAC frame
(1024 samples), and packets go out in timestamp order so the muxer's interleaving queue stays
short.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Literal, cast

import av
import numpy as np
from av.audio.stream import AudioStream
from av.video.codeccontext import VideoCodecContext

from service.errors import MediaError
from service.media.audio_out import ExactResampler, mono_frame
from service.media.mp4_edits import set_track_edit
from service.media.source import open_input, video_stream

MuxContainer = Literal["mp4", "mov", "mkv"]
_FORMATS: dict[str, str] = {"mp4": "mp4", "mov": "mov", "mkv": "matroska"}
_AAC_FRAME = 1024
_AAC_BIT_RATE = 128_000
# FFmpeg's "fast" AAC coder: at 128 kb/s it sounds better than the "twoloop" search and needs
# about half the CPU (FFmpeg made it the default for that reason in 2018).
_AAC_OPTIONS = {"aac_coder": "fast"}
FOLEY_TITLE = "Foley"
_MAX_MOVIE_TIMESCALE = 1 << 22  # beyond this, fall back to the audio rate (rounding < 1 sample)
_AVFMT_TS_NONSTRICT = 0x20000  # libavformat: equal decode times are allowed (Matroska)


class FoleyMuxer:
    """Context manager: `write` float32 mono chunks at `in_rate` in order; the file is complete
    when the block exits without an exception, and removed when it exits with one.

    Not thread-safe: one muxer per render.
    """

    def __init__(
        self,
        video_path: Path,
        output_path: Path,
        *,
        container: MuxContainer,
        start_s: float,
        in_rate: int,
        out_rate: int,
        replace_audio: bool = False,
    ) -> None:
        if container not in _FORMATS:
            raise ValueError(f"container must be one of {sorted(_FORMATS)}, not {container!r}")
        self._path, self._container, self._start_s = output_path, container, start_s
        self._rate = out_rate
        self._resampler = ExactResampler(in_rate, out_rate, "flt")
        self._pending = np.zeros(0, np.float32)  # less than one AAC frame
        self._samples = 0
        self._priming: int | None = None
        self._start = round(start_s * out_rate)  # pts of track sample 0
        self._last_dts: dict[int, tuple[int, Fraction]] = {}  # by output stream index
        self._fixed = {"moved": 0, "filled": 0}  # copied packets whose timestamps were fixed
        # Closed here if opening fails; otherwise kept open until __exit__.
        with _as_media_error(container, output_path), contextlib.ExitStack() as closers:
            self._open(video_path, replace_audio, closers)
            self._closers = closers.pop_all()

    def _open(self, video_path: Path, replace_audio: bool, closers: contextlib.ExitStack) -> None:
        src = closers.enter_context(open_input(video_path))
        video_in = video_stream(src)
        copied = [video_in, *([] if replace_audio else src.streams.audio)]
        options = {}
        if self._container in ("mp4", "mov"):
            options["movie_timescale"] = str(_movie_timescale(video_in.time_base, self._rate))
        self._out = closers.enter_context(
            av.open(
                str(self._path),
                "w",
                format=_FORMATS[self._container],
                container_options=options,
            )
        )
        # The input's own streams first, as they were (its audio keeps its place, title and
        # language), then the Foley as one more audio track, named for what it is.
        self._outputs = _copy_streams(self._out, copied, self._container)
        self._track: AudioStream = self._out.add_stream(
            "aac", rate=self._rate, layout="mono", options=dict(_AAC_OPTIONS)
        )
        self._track.codec_context.bit_rate = _AAC_BIT_RATE
        # Matroska keeps the title as the track's name; MP4 and MOV as its `name` box and
        # handler name, which editors show.
        self._track.metadata["title"] = FOLEY_TITLE
        self._track.metadata["handler_name"] = FOLEY_TITLE
        self._track.metadata["language"] = "und"
        _start(self._out, copied, self._container)
        self._packets = (p for p in src.demux(*copied) if p.size)  # no flush packets
        self._strict = not self._out.format.flags & _AVFMT_TS_NONSTRICT
        self._next_packet: av.Packet[av.stream.Stream] | None = None

    def __enter__(self) -> FoleyMuxer:
        return self

    @property
    def notes(self) -> tuple[str, ...]:
        notes = []
        if self._fixed["moved"]:
            notes.append(
                f"{self._fixed['moved']} packets of the video had timestamps out of order or "
                f"repeated, which {self._container} cannot store: they were moved to the next "
                "time it can"
            )
        if self._fixed["filled"]:
            notes.append(
                f"{self._fixed['filled']} packets of the video had no timestamps: each was "
                "given the time one frame after the one before"
            )
        return tuple(notes)

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None:
            try:
                self._closers.close()
            finally:
                self._path.unlink(missing_ok=True)
            return
        with _as_media_error(self._container, self._path):
            with self._closers:
                for chunk in [*self._frames(self._resampler.flush()), self._pending]:
                    self._encode(chunk)
                self._encode(None)
                self._copy_until(None)
            if self._container in ("mp4", "mov"):
                set_track_edit(
                    self._path,
                    self._track.index,
                    start_s=Fraction(self._start_s).limit_denominator(10**7),
                    media_time=self._priming or 0,
                    media_duration=self._samples,
                )

    def write(self, samples: np.ndarray) -> None:
        with _as_media_error(self._container, self._path):
            for chunk in self._resampler.push(samples):
                for frame in self._frames(chunk):
                    self._encode(frame)

    def _frames(self, samples: np.ndarray) -> list[np.ndarray]:
        """Whole AAC frames of the pending samples and `samples`; the rest stays pending."""
        pending = np.concatenate([self._pending, samples])
        whole = len(pending) // _AAC_FRAME * _AAC_FRAME
        self._pending = pending[whole:]
        return [pending[i : i + _AAC_FRAME] for i in range(0, whole, _AAC_FRAME)]

    def _encode(self, samples: np.ndarray | None) -> None:
        """Encode one frame (None: flush the encoder) and mux what comes out, after the input's
        packets that come before it."""
        frame = None
        if samples is not None:
            if len(samples) == 0:
                return
            frame = mono_frame(samples, "fltp", self._rate, self._start + self._samples)
            self._samples += len(samples)
        for packet in self._track.encode(frame):
            assert packet.pts is not None  # the encoder stamps each packet it makes
            if self._priming is None:  # the encoder's delay: its first packet starts early
                self._priming = self._start - packet.pts
            self._copy_until(packet.pts * Fraction(1, self._rate))
            self._out.mux(packet)

    def _copy_until(self, t: Fraction | None) -> None:
        """Copy the input's packets that start before `t` seconds (None: all that remain)."""
        while True:
            if self._next_packet is None:
                self._next_packet = next(self._packets, None)
                if self._next_packet is None:
                    return
            packet = self._next_packet
            at = packet.dts if packet.dts is not None else packet.pts
            if t is not None and at is not None and at * packet.time_base >= t:
                return
            packet.stream = self._outputs[packet.stream.index]
            fixed = _fix_timestamps(
                packet, self._last_dts, strict=self._strict, start_s=self._start_s
            )
            if fixed:
                self._fixed[fixed] += 1
            self._out.mux(packet)
            self._next_packet = None


def _fix_timestamps(
    packet: av.Packet[av.stream.Stream],
    last: dict[int, tuple[int, Fraction]],
    *,
    strict: bool,
    start_s: float,
) -> str | None:
    """Make `packet`'s timestamps ones the muxer takes, as FFmpeg's command line does
    (fftools/ffmpeg_mux.c, and `-fflags +genpts`): a packet without any is "filled" one frame
    after its stream's last (the first at `start_s`); a decode time after the presentation time
    becomes the median of the two and the next allowed time, and one not after the stream's
    last (`strict`: not equal either) the next allowed time: "moved". `last`: each stream's last
    decode time, in ticks and exactly in seconds. -> what was done, if anything."""
    pts, dts = packet.pts, packet.dts
    index, tb = packet.stream.index, packet.time_base
    previous, previous_s = last.get(index, (None, None))
    done = None
    if dts is None:
        if pts is not None:  # the muxer derives it (B-frames in Matroska)
            return None
        # Seconds, exact, so that rounding to ticks does not add up over a long file.
        step_s = _step_s(packet)
        at_s = Fraction(start_s) if previous_s is None else previous_s + step_s
        pts = dts = round(at_s / tb)
        done = "filled"
    if pts is not None and dts > pts:
        pts = dts = pts if previous is None else sorted((pts, dts, previous + 1))[1]
        done = "moved"
    if previous is not None:
        floor = previous + strict
        if dts < floor:
            if pts is not None and pts >= dts:
                pts = max(pts, floor)
            dts = floor
            done = done or "moved"
    if done:
        packet.pts, packet.dts = pts, dts
    last[index] = (dts, at_s if done == "filled" else dts * tb)
    return done


def _step_s(packet: av.Packet[av.stream.Stream]) -> Fraction:
    """A packet's duration: a video frame at the stream's rate (stored durations are rounded
    to the time base: a millisecond each in Matroska), else as stored."""
    rate = getattr(packet.stream, "average_rate", None)
    if rate:
        return 1 / Fraction(rate)
    return packet.duration * packet.time_base if packet.duration else Fraction(1, 30)


@contextlib.contextmanager
def _as_media_error(container: str, output_path: Path) -> Iterator[None]:
    """FFmpeg's failures while writing, as a MediaError; the partial output is removed."""
    try:
        yield
    except av.FFmpegError as exc:
        output_path.unlink(missing_ok=True)
        raise MediaError(
            f"The video cannot be written as {container} ({exc.strerror}).", code="mux_failed"
        ) from exc
    except MediaError:
        output_path.unlink(missing_ok=True)
        raise


def _copy_streams(
    out: av.container.OutputContainer, streams: list[av.stream.Stream], container: str
) -> dict[int, av.stream.Stream]:
    """Output streams that copy `streams`, by input stream index."""
    copies = {}
    for stream in streams:
        try:
            # opaque: reuse the input's codec object; AV1 decoded by libdav1d has no encoder of
            # that name, and a stream copy needs none.
            copy = out.add_stream_from_template(stream, opaque=True)
        except ValueError as exc:  # PyAV: this format cannot hold this codec
            raise _incompatible([stream], container) from exc
        if stream.type == "video" and stream.average_rate:
            # The template copies the codec's frame rate, which some files store wrongly
            # (30000 for 29.97): keep the rate the input stream really has.
            video = cast(VideoCodecContext, copy.codec_context)  # a video stream's copy
            video.framerate = stream.average_rate
        copies[stream.index] = copy
    return copies


def _start(
    out: av.container.OutputContainer, streams: list[av.stream.Stream], container: str
) -> None:
    """Write the header now, so a codec the muxer cannot store fails here and not mid-copy."""
    try:
        out.start_encoding()
    except av.FFmpegError as exc:
        raise _incompatible(streams, container) from exc


def _incompatible(streams: list[av.stream.Stream], container: str) -> MediaError:
    codecs = ", ".join(s.codec_context.codec.canonical_name for s in streams)
    return MediaError(
        f"A {container} file cannot hold this video's streams ({codecs}); choose mkv.",
        code="incompatible_container",
    )


def _movie_timescale(video_time_base: Fraction | None, rate: int) -> int:
    scale = math.lcm(rate, video_time_base.denominator) if video_time_base else rate
    return scale if scale <= _MAX_MOVIE_TIMESCALE else rate
