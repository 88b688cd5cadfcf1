"""The Foley track at a usable level: EBU R128 loudness normalisation of an offline render, and a
fixed calibrated level for live streams.

    with LevelledSink(output, sample_rate=48000, target_lufs=-23.0) as sink:
        sink.write(chunk) ...          # float32 mono chunks, as the render makes them
    sink.levelling                     # what was applied: gain, limiting, the measured result

`output` (an audio file or muxer sink, already open, so that a bad output fails before the
render) receives the levelled track when the LevelledSink closes, and is closed with it.

Loudness (integrated, gated) and true peak are ITU-R BS.1770 as FFmpeg's `ebur128` filter
measures them, run through PyAV; nothing here re-implements the standard. The track is spooled
to a temporary file while it is rendered and measured, so one gain for the whole render can be
known before anything is written: the relative levels inside the clip stay as generated. Contact
sounds have a high peak-to-loudness ratio, so at -23 LUFS their loudest attacks would pass the
true-peak ceiling: FFmpeg's `alimiter` (look-ahead, delay compensated, so sync is kept) takes
those attacks down, and leaves every sample below its threshold exactly as it was. A last trim
gain, measured on the limited track, keeps the true peak under the ceiling whatever the
limiter's inter-sample overshoot.

A track with no 400 ms block above the standard's -70 LUFS gate (silence, or a clip under 0.4 s)
has no loudness to match: it keeps its level (gain 0), and only the ceiling applies.

A live stream cannot wait for its end to be measured: `LiveLevel` applies the tier's calibrated
gain (`live_gain_db` in its config: the median gain offline renders of typical clips take,
`python -m engines.eval.loudness`) and the same limiter, chunk by chunk. Its look-ahead holds the
last LIMITER_ATTACK_MS of each chunk back until the next one (sample i out is still sample i in).

Memory: one chunk at a time. The spool is on disk (4 bytes a sample: 11.5 MB a minute at 48 kHz,
twice that while the limited copy is written) and removed on close. Not thread-safe: one per
render.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import av
import numpy as np

from service.media.audio_out import Sink, mono_frame

DEFAULT_TARGET_LUFS = -23.0  # EBU R128
MIN_LUFS, MAX_LUFS = -50.0, -5.0  # the targets accepted: broadcast to loud streaming and beyond
CEILING_DBTP = -1.0
GATE_LUFS = -70.0  # BS.1770's absolute gate: ebur128 reports it when no block passes
# A render whose loudness needs more than this is (nearly) silent: raising its noise floor by
# more serves no one.
MAX_GAIN_DB = 60.0
LIMIT_MARGIN_DB = 0.5  # the limiter works on sample peaks: this much under the true-peak ceiling
TRIM_MARGIN_DB = 0.05  # room for the output's resampling and 16-bit rounding
LIMITER_ATTACK_MS = 1.0
LIMITER_RELEASE_MS = 20.0
LEVEL_ROUNDS = 8
LEVEL_TOLERANCE_LU = 0.1
CHUNK_SAMPLES = 48000


@dataclass(frozen=True)
class Loudness:
    integrated_lufs: float | None  # None: no block above the gate
    true_peak_dbtp: float  # -inf for digital silence (the sample peak where so measured)


@dataclass(frozen=True)
class Levelling:
    """What a render's level became: `gain_db` applied to the whole track, at most `limited_db`
    taken off its loudest attacks by the limiter, and the result as measured."""

    target_lufs: float
    gain_db: float
    limited_db: float
    loudness: Loudness


class _Filters:
    """float32 mono chunks through an FFmpeg filter chain ("name", "options") ... at `rate`;
    `push` returns what came out, `finish` the rest and the last frame's metadata."""

    def __init__(self, rate: int, chain: list[tuple[str, str]]) -> None:
        self.rate = rate
        self.graph = av.filter.Graph()
        node = self.graph.add_abuffer(format="flt", sample_rate=rate, layout="mono")
        self._source = node
        for name, options in [*chain, ("aformat", "sample_fmts=flt")]:
            following = self.graph.add(name, options)
            node.link_to(following)
            node = following
        node.link_to(self.graph.add("abuffersink"))
        self.graph.configure()
        self._pts = 0
        self.metadata: list[dict[str, str]] = []

    def push(self, samples: np.ndarray) -> list[np.ndarray]:
        if not len(samples):
            return []
        self._source.push(mono_frame(np.ascontiguousarray(samples, np.float32), "flt", self.rate,
                                     self._pts))  # fmt: skip
        self._pts += len(samples)
        return self._drain()

    def finish(self) -> list[np.ndarray]:
        self._source.push(None)
        return self._drain()

    def _drain(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        while True:
            try:
                frame = self.graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return out
            self.metadata.append(dict(frame.metadata))
            out.append(frame.to_ndarray().reshape(-1))


_FLOOR = np.resize(np.array([1e-9, -1e-9], np.float32), 48000)


class LoudnessMeter:
    """Integrated loudness and true peak of a track pushed in chunks (FFmpeg's ebur128; with
    `true_peak=False` the sample peak, at a third of the cost)."""

    def __init__(self, sample_rate: int, *, true_peak: bool = True) -> None:
        mode = "true" if true_peak else "sample"
        self._filters = _Filters(sample_rate, [("ebur128", f"metadata=1:peak={mode}")])
        self._key = f"lavfi.r128.{mode}_peak"

    def push(self, samples: np.ndarray) -> None:
        # Long runs of exact zeros (between contacts) decay the K-weighting filters' state into
        # denormal floats, which makes the meter several times slower; a -180 dBFS floor keeps
        # it out of them and changes no reading (the gate is at -70 LUFS).
        n = len(samples)
        self._filters.push(samples + (_FLOOR[:n] if n <= len(_FLOOR) else np.resize(_FLOOR, n)))

    def result(self) -> Loudness:
        self._filters.finish()
        # Every 100 ms frame carries the readings so far; a partial last one flushed at the
        # end carries none.
        frames = [m for m in self._filters.metadata if "lavfi.r128.I" in m]
        if not frames:
            return Loudness(None, -math.inf)
        integrated = float(frames[-1]["lavfi.r128.I"])
        peak = max(float(m[self._key]) for m in frames)
        return Loudness(
            integrated if integrated > GATE_LUFS else None,
            20 * math.log10(peak) if peak > 0 else -math.inf,
        )


def measure(samples: np.ndarray, sample_rate: int) -> Loudness:
    meter = LoudnessMeter(sample_rate)
    for start in range(0, len(samples), CHUNK_SAMPLES):
        meter.push(samples[start : start + CHUNK_SAMPLES])
    return meter.result()


class LevelledSink:
    """A Sink that brings the track to `target_lufs` before `output` receives it (on close: a
    few passes over the spooled track find the gain, one more writes it out). `levelling` is
    set once closed."""

    def __init__(
        self,
        output: Sink,
        *,
        sample_rate: int,
        target_lufs: float = DEFAULT_TARGET_LUFS,
        ceiling_dbtp: float = CEILING_DBTP,
    ) -> None:
        self.output, self.rate = output, sample_rate
        self.target, self.ceiling = target_lufs, ceiling_dbtp
        self.levelling: Levelling | None = None
        self._spool: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed on exit)
        self._meter = LoudnessMeter(sample_rate, true_peak=False)
        self._samples = 0

    def __enter__(self) -> LevelledSink:
        return self

    @property
    def notes(self) -> tuple[str, ...]:
        return self.output.notes

    def write(self, samples: np.ndarray) -> None:
        samples = np.ascontiguousarray(samples, np.float32)
        self._spool.write(samples.tobytes())
        self._meter.push(samples)
        self._samples += len(samples)

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            if exc_type is None:
                with self.output as output:
                    self._level(output)
            else:
                self.output.__exit__(exc_type, *rest)
        finally:
            self._spool.close()

    def _level(self, output: Sink) -> None:
        measured = self._meter.result()
        peak_db = measured.true_peak_dbtp  # the sample peak: the limiter's own measure
        threshold_db = self.ceiling - LIMIT_MARGIN_DB
        gain_db = 0.0
        if measured.integrated_lufs is not None:
            gain_db = min(self.target - measured.integrated_lufs, MAX_GAIN_DB)
            # Not one step: blocks the absolute gate left out join in at a higher level, and
            # limiting the loudest attacks takes loudness off (the more, the higher the gain).
            # Measure and correct, by the secant through the last two rounds.
            tried: list[tuple[float, float]] = []  # (gain, loudness) of each round
            for _ in range(LEVEL_ROUNDS):
                after = self._limited(gain_db, peak_db, threshold_db, true_peak=False)
                if after.integrated_lufs is None:
                    break
                error = self.target - after.integrated_lufs
                if abs(error) <= LEVEL_TOLERANCE_LU:
                    break
                slope = 1.0  # loudness per dB of gain: 1 where nothing is limited
                if tried:
                    g0, l0 = tried[-1]
                    if abs(gain_db - g0) > 1e-6:
                        slope = min(max((after.integrated_lufs - l0) / (gain_db - g0), 0.05), 1.0)
                tried.append((gain_db, after.integrated_lufs))
                gain_db = min(gain_db + error / slope, MAX_GAIN_DB)
        with tempfile.TemporaryFile() as spool:
            after = self._limited(gain_db, peak_db, threshold_db, out=spool)
            trim_db = min(0.0, self.ceiling - TRIM_MARGIN_DB - after.true_peak_dbtp)
            trim = np.float32(10 ** (trim_db / 20))
            for chunk in self._chunks(spool, self._samples):
                output.write(chunk * trim)
        self.levelling = Levelling(
            target_lufs=self.target,
            gain_db=gain_db + trim_db,
            limited_db=max(0.0, peak_db + gain_db - threshold_db),
            loudness=Loudness(
                None if after.integrated_lufs is None else after.integrated_lufs + trim_db,
                after.true_peak_dbtp + trim_db,
            ),
        )

    def _limited(
        self,
        gain_db: float,
        peak_db: float,
        threshold_db: float,
        *,
        true_peak: bool = True,
        out: IO[bytes] | None = None,
    ) -> Loudness:
        """The spooled track (sample peak `peak_db`) at `gain_db`, through the limiter at
        `threshold_db` where it reaches that, measured (and written to `out`)."""
        gain = np.float32(10 ** (gain_db / 20))
        chain = [_limiter(threshold_db)] if peak_db + gain_db > threshold_db else []
        limiter = _Filters(self.rate, chain)
        meter = LoudnessMeter(self.rate, true_peak=true_peak)

        def take(chunks: list[np.ndarray]) -> None:
            for chunk in chunks:
                meter.push(chunk)
                if out is not None:
                    out.write(chunk.tobytes())

        for chunk in self._chunks(self._spool, self._samples):
            take(limiter.push(chunk * gain))
        take(limiter.finish())
        if out is not None and out.tell() != 4 * self._samples:
            raise AssertionError(f"the limiter returned {out.tell() // 4} samples, "
                                 f"not {self._samples}")  # fmt: skip
        return meter.result()

    @staticmethod
    def _chunks(spool: IO[bytes], samples: int) -> Iterator[np.ndarray]:
        spool.seek(0)
        for start in range(0, samples, CHUNK_SAMPLES):
            n = min(CHUNK_SAMPLES, samples - start)
            yield np.frombuffer(spool.read(4 * n), np.float32)


def _limiter(threshold_db: float) -> tuple[str, str]:
    options = (
        f"limit={10 ** (threshold_db / 20):.6f}:attack={LIMITER_ATTACK_MS}:"
        f"release={LIMITER_RELEASE_MS}:level=false:latency=true"
    )
    return ("alimiter", options)


class LiveLevel:
    """A live stream at the tier's calibrated `gain_db`, under the ceiling: `push` chunks in
    order, each returning what is ready (following on from the last), `flush` the rest once the
    stream ends. Sample for sample the same whatever the chunks."""

    def __init__(self, sample_rate: int, gain_db: float, ceiling_dbtp: float = CEILING_DBTP):
        self._gain = np.float32(10 ** (gain_db / 20))
        self._filters = _Filters(sample_rate, [_limiter(ceiling_dbtp - LIMIT_MARGIN_DB)])

    def push(self, samples: np.ndarray) -> np.ndarray:
        return _joined(self._filters.push(np.asarray(samples, np.float32) * self._gain))

    def flush(self) -> np.ndarray:
        return _joined(self._filters.finish())


def _joined(chunks: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.zeros(0, np.float32), *chunks])
