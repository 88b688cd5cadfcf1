"""Put the Foley track into a copy of the uploaded video: video stream-copied, Foley encoded as AAC.

    video (any allowed container) + WAV (mono, sample 0 = the first video frame at `start_s`)
    -> mp4 / mov / mkv: [video copy, Foley AAC, (the input's own audio streams, copied)]

The Foley track starts exactly at `start_s`. The AAC encoder delays its output by `priming`
samples (first packet pts = -1024); Matroska stores that as CodecDelay by itself, MP4/MOV need
`mp4_edits.set_track_edit` (see there). `movie_timescale` is a common multiple of the video's and
the track's rates, so edit lists are exact rather than rounded to FFmpeg's default 1/1000 s.

Memory is bounded: packets are copied one at a time and the WAV is read in 1024-sample frames,
in timestamp order so the muxer's interleaving queue stays short.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import numpy as np
from av.audio.stream import AudioStream

from service.errors import MediaError
from service.media.audio_out import mono_frame
from service.media.mp4_edits import set_track_edit
from service.media.source import open_input, video_stream

MuxContainer = Literal["mp4", "mov", "mkv"]
_FORMATS: dict[str, str] = {"mp4": "mp4", "mov": "mov", "mkv": "matroska"}
_AAC_FRAME = 1024
_AAC_BIT_RATE = 128_000
# FFmpeg's "fast" AAC coder: at 128 kb/s it sounds better than the "twoloop" search and needs
# about half the CPU (FFmpeg made it the default for that reason in 2018).
_AAC_OPTIONS = {"aac_coder": "fast"}
_MAX_MOVIE_TIMESCALE = 1 << 22  # beyond this, fall back to the audio rate (rounding < 1 sample)


def mux_audio_into_video(
    video_path: Path,
    audio_wav_path: Path,
    output_path: Path,
    *,
    container: MuxContainer,
    start_s: float,
    keep_original_audio: bool = False,
) -> None:
    if container not in _FORMATS:
        raise ValueError(f"container must be one of {sorted(_FORMATS)}, not {container!r}")
    try:
        _mux(video_path, audio_wav_path, output_path, container, start_s, keep_original_audio)
    except av.FFmpegError as exc:
        output_path.unlink(missing_ok=True)
        raise MediaError(
            f"The video cannot be written as {container} ({exc.strerror}).", code="mux_failed"
        ) from exc
    except MediaError:
        output_path.unlink(missing_ok=True)
        raise


def _mux(
    video_path: Path,
    wav_path: Path,
    output_path: Path,
    container: str,
    start_s: float,
    keep_original_audio: bool,
) -> None:
    with open_input(video_path) as src, av.open(str(wav_path)) as wav:
        video_in = video_stream(src)
        audio_in = list(src.streams.audio) if keep_original_audio else []
        rate = wav.streams.audio[0].rate
        options = {}
        if container in ("mp4", "mov"):
            options["movie_timescale"] = str(_movie_timescale(video_in.time_base, rate))
        with av.open(
            str(output_path), "w", format=_FORMATS[container], container_options=options
        ) as out:
            outputs = _copy_streams(out, [video_in], container)
            foley = _FoleyTrack(out, wav, rate, start_s)
            outputs |= _copy_streams(out, audio_in, container)
            _start(out, [video_in, *audio_in], container)
            for packet in src.demux(video_in, *audio_in):
                if packet.size == 0:  # the demuxer's flush packets
                    continue
                t = packet.dts if packet.dts is not None else packet.pts
                if t is not None:
                    foley.mux_until(t * packet.time_base)
                packet.stream = outputs[packet.stream.index]
                out.mux(packet)
            foley.mux_until(None)
            track_index, priming, samples = foley.stream.index, foley.priming, foley.samples
    if container in ("mp4", "mov"):
        start = Fraction(start_s).limit_denominator(10**7)
        set_track_edit(
            output_path, track_index, start_s=start, media_time=priming, media_duration=samples
        )


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
            copy.codec_context.framerate = stream.average_rate
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


class _FoleyTrack:
    """The WAV as AAC packets, muxed on demand up to a given time."""

    def __init__(
        self,
        out: av.container.OutputContainer,
        wav: av.container.InputContainer,
        rate: int,
        start_s: float,
    ) -> None:
        self.stream: AudioStream = out.add_stream(
            "aac", rate=rate, layout="mono", options=dict(_AAC_OPTIONS)
        )
        self.stream.codec_context.bit_rate = _AAC_BIT_RATE
        self._out = out
        self._time_base = Fraction(1, rate)
        self._start = round(start_s * rate)  # pts of WAV sample 0
        self._packets = self._encode(wav, rate)
        self._next: av.Packet | None = None
        self.priming = 0
        self.samples = 0

    def mux_until(self, t: Fraction | None) -> None:
        """Mux every packet that starts at or before `t` seconds (None: all that remain)."""
        while True:
            if self._next is None:
                self._next = next(self._packets, None)
                if self._next is None:
                    return
            if t is not None and self._next.pts * self._time_base > t:
                return
            self._out.mux(self._next)
            self._next = None

    def _encode(self, wav: av.container.InputContainer, rate: int) -> Iterator[av.Packet]:
        for i, packet in enumerate(self._aac_packets(wav, rate)):
            if i == 0:  # the encoder's delay: its first packet starts `priming` samples early
                self.priming = self._start - packet.pts
            yield packet

    def _aac_packets(self, wav: av.container.InputContainer, rate: int) -> Iterator[av.Packet]:
        for chunk in _chunks(wav, rate):
            frame = mono_frame(chunk, "fltp", rate, self._start + self.samples)
            self.samples += len(chunk)
            yield from self.stream.encode(frame)
        yield from self.stream.encode(None)


def _chunks(wav: av.container.InputContainer, rate: int) -> Iterator[np.ndarray]:
    """The WAV's samples as float32 mono, in frames of 1024 (the last one shorter)."""
    pending = np.zeros(0, np.float32)
    for frame in _float_frames(wav, rate):
        pending = np.concatenate([pending, frame.to_ndarray().reshape(-1)])
        while len(pending) >= _AAC_FRAME:
            yield pending[:_AAC_FRAME]
            pending = pending[_AAC_FRAME:]
    if len(pending):
        yield pending


def _float_frames(wav: av.container.InputContainer, rate: int) -> Iterator[av.AudioFrame]:
    to_float = av.AudioResampler(format="flt", layout="mono", rate=rate)  # same rate: no resampling
    for frame in wav.decode(audio=0):
        yield from to_float.resample(frame)
    yield from to_float.resample(None)
