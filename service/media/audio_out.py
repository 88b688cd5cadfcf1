"""Streaming writer of the Foley track: float32 mono chunks -> WAV (pcm_s16le) or FLAC (s16).

    write(samples float32 (n,) at in_rate, in [-1, 1]) ... close()
    -> a file of exactly round(n_total * out_rate / in_rate) samples at out_rate

Resampling is swresample's (through PyAV's `AudioResampler`), which also converts float to s16
with clipping; its output is aligned with its input (an impulse at 0.5 s stays at 0.5 s, measured
for 44.1, 24 and 16 kHz), so the track keeps its sync with the video. swresample rounds the total
length its own way (off by one at 44.1 and 24 kHz): `ExactResampler.flush` pads or cuts the
flushed tail to the exact count (the muxer resamples with it too). Memory is bounded by one
chunk: nothing is kept between writes.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Literal, Protocol

import av
import numpy as np

AudioFormat = Literal["wav", "flac"]
_CODECS: dict[str, Literal["pcm_s16le", "flac"]] = {"wav": "pcm_s16le", "flac": "flac"}


def mono_frame(samples: np.ndarray, fmt: str, rate: int, pts: int) -> av.AudioFrame:
    """(n,) samples -> a mono frame whose pts counts samples (time base 1/rate)."""
    frame = av.AudioFrame.from_ndarray(samples[None], format=fmt, layout="mono")
    frame.sample_rate = rate
    frame.pts, frame.time_base = pts, Fraction(1, rate)
    return frame


class ExactResampler:
    """float32 mono chunks at in_rate -> chunks at out_rate in `fmt` ("flt" or "s16", through
    swresample, which clips when converting to s16); after `flush`, exactly
    round(n_in * out_rate / in_rate) samples have come out in all."""

    def __init__(self, in_rate: int, out_rate: int, fmt: str) -> None:
        self.in_rate, self.out_rate = in_rate, out_rate
        self._dtype = np.float32 if fmt == "flt" else np.int16
        self._resampler = av.AudioResampler(format=fmt, layout="mono", rate=out_rate)
        self._samples_in = 0
        self._samples_out = 0

    def push(self, samples: np.ndarray) -> list[np.ndarray]:
        samples = np.ascontiguousarray(samples, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono samples of shape (n,), got {samples.shape}")
        if len(samples) == 0:
            return []
        frame = mono_frame(samples, "flt", self.in_rate, self._samples_in)
        self._samples_in += len(samples)
        return self._count([f.to_ndarray()[0] for f in self._resampler.resample(frame)])

    def flush(self) -> np.ndarray:
        """The rest, padded with silence or cut to the exact total."""
        tail = [f.to_ndarray()[0] for f in self._resampler.resample(None)]
        missing = round(self._samples_in * self.out_rate / self.in_rate) - self._samples_out
        assert missing >= 0, f"the resampler wrote {-missing} samples too many"
        return self._count([np.concatenate([*tail, np.zeros(missing, self._dtype)])[:missing]])[0]

    def _count(self, chunks: list[np.ndarray]) -> list[np.ndarray]:
        self._samples_out += sum(len(c) for c in chunks)
        return chunks


class Sink(Protocol):
    """Where a rendered track goes: an audio file (AudioWriter), the muxed video
    (service.media.mux.FoleyMuxer), or a LevelledSink in front of either. `notes`: what it had
    to repair in the input to write it, known once closed."""

    @property
    def notes(self) -> tuple[str, ...]: ...

    def write(self, samples: np.ndarray) -> None: ...

    def __enter__(self) -> Sink: ...

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None: ...


class AudioWriter:
    """Context manager: `write` chunks in order, the file is complete after `close`.

    Not thread-safe: one writer per render.
    """

    def __init__(
        self, path: Path, fmt: AudioFormat, *, in_rate: int = 48000, out_rate: int = 48000
    ) -> None:
        if fmt not in _CODECS:
            raise ValueError(f"audio format must be one of {sorted(_CODECS)}, not {fmt!r}")
        self.in_rate, self.out_rate = in_rate, out_rate
        self.notes: tuple[str, ...] = ()  # a track is written as it comes
        self._container = av.open(str(path), "w", format=fmt)
        self._stream = self._container.add_stream(_CODECS[fmt], rate=out_rate, layout="mono")
        self._stream.format = "s16"
        self._container.start_encoding()  # a track with no samples is still a valid file
        self._resampler = ExactResampler(in_rate, out_rate, "s16")
        self._samples_out = 0
        self._closed = False

    def __enter__(self) -> AudioWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, samples: np.ndarray) -> None:
        for chunk in self._resampler.push(samples):
            self._encode(chunk)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._encode(self._resampler.flush())
            self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()

    def _encode(self, samples: np.ndarray) -> None:
        if len(samples) == 0:
            return
        frame = mono_frame(samples, "s16", self.out_rate, self._samples_out)
        self._samples_out += len(samples)
        self._container.mux(self._stream.encode(frame))
