"""FoleyEngine: loads a tier once and renders clips with it; what every transport calls.

    decode (child process) -> preprocess -> encoder -> generator -> vocoder -> write / mux

The track goes to its sink window by window as it is made: an audio file, or the muxer, which
copies the video's packets alongside (no intermediate file).

Work already done is reused (settings `static_threshold`, `window_memo`, `motion_templates`):
static frames skip the encoder, and windows of generator and vocoder output and encoder features
are kept in the engine's `Cache` (service.pipeline.memo), so a re-render of an edited clip
recomputes the edited span and little more. `RenderResult.reuse` counts what was saved.

Thread-safety: `render` may be called from several worker threads at once. Each call has its own
decode process, resampler, synthesizer, counters and writer; the shared state is the backend,
whose sessions are safe to run concurrently (see its docstring), and the cache, which is
thread-safe. Nothing per-request is stored on self.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from service.cache import create_cache
from service.cache.base import Cache
from service.config import Settings
from service.errors import BackendUnavailable, InvalidInput, MediaError, ModelConfigError, echo
from service.media import decode
from service.media.audio_out import AudioWriter, Sink
from service.media.decode import DecodeLimits, open_video, probe
from service.media.loudness import LevelledSink
from service.media.mux import FoleyMuxer
from service.media.source import VideoInfo
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contacts.synth import ContactSynth
from service.pipeline.contacts.tier import ContactTier
from service.pipeline.contract import TierConfig
from service.pipeline.memo import FeatureCache, WindowMemo
from service.pipeline.motion.synth import MotionSynth
from service.pipeline.motion.tier import MotionTier
from service.pipeline.preprocess import FrameResampler, ModelFrames
from service.pipeline.streaming import Memo, StageTimer, StreamingSynth
from service.pipeline.tier import Tier, load_tier
from service.pipeline.types import (
    AUDIO_FORMATS,
    SAMPLE_RATES,
    ContactMarker,
    ProgressFn,
    RenderOptions,
    RenderResult,
    ReuseStats,
)

log = logging.getLogger(__name__)
CUT_SHORT_S = 0.25  # frames ending this far before the declared duration: the file was cut


class FoleyEngine:
    def __init__(
        self, settings: Settings, tier: Tier, backend: Backend, cache: Cache | None = None
    ) -> None:
        """`cache`: where the window memo and the feature cache keep their entries (shared with
        whatever else uses it); None: one in this process, within `cache_max_bytes`."""
        self.settings = settings
        self.tier = tier
        self.backend = backend
        self.limits = DecodeLimits.from_settings(settings)
        self.cache = cache if cache is not None else create_cache(settings)
        self.memo: Memo | None = None
        if settings.window_memo and self.cache.name != "none" and isinstance(tier, TierConfig):
            windows = WindowMemo(self.cache, tier, templates=settings.motion_templates)
            self.memo = Memo(windows, FeatureCache(self.cache, tier))

    @classmethod
    def load(
        cls, settings: Settings, tier_name: str | None = None, cache: Cache | None = None
    ) -> FoleyEngine:
        """The tier `tier_name` of `settings.models_dir` (None: the settings' default tier)."""
        models = settings.models_dir
        name = settings.default_tier if tier_name is None else tier_name
        try:
            tier = load_tier(models, name)
            backend = create_backend(
                settings.backend,
                tier,
                threads=settings.intra_op_threads,
                engine_cache_dir=settings.engine_cache_dir,
            )
        except BackendUnavailable:
            raise
        except Exception as exc:  # a missing or damaged file; ONNX Runtime raises bare Exceptions
            raise ModelConfigError(
                f"tier {name!r} in {models} cannot be loaded ({type(exc).__name__}: {exc}); "
                "FOLEY_MODELS_DIR names the folder that holds the tiers"
            ) from exc
        info = backend.info()
        log.info("loaded tier %s %s on %s (%s)", tier.name, tier.version, info.name, info.device)
        return cls(settings, tier, backend, cache)

    def warmup(self) -> None:
        """Start the decoder's forkserver and stream a few frames through every stage, in the
        chunk sizes requests use (a decoded batch; a live frame), so the first request pays no
        first-run cost."""
        decode.warm_up()
        synth = self._synth(StageTimer())
        start = 0
        for n in (decode.BATCH_FRAMES, 1):
            rgb = np.zeros((n, self.tier.height, self.tier.width, 3), np.uint8)
            list(synth.push(np.arange(start, start + n) / 30.0, rgb))
            start += n
        list(synth.finish(start / 30.0))

    def probe(self, input_path: Path) -> VideoInfo:
        return probe(input_path, limits=self.limits)

    def render(
        self,
        input_path: Path,
        output_path: Path,
        options: RenderOptions,
        progress: ProgressFn | None = None,
    ) -> RenderResult:
        self._check(options)
        started = time.perf_counter()
        timer = StageTimer()
        stage = "write" if options.format in AUDIO_FORMATS else "mux"
        opened: list[Sink] = []

        def open_sink(start_s: float) -> Sink:
            sink = self._open_sink(input_path, output_path, options, start_s)
            if options.loudness_lufs is not None:
                rate, target = self.tier.sample_rate, options.loudness_lufs
                sink = LevelledSink(sink, sample_rate=rate, target_lufs=target)
            opened.append(sink)
            return sink

        synth = self._synth(timer)
        start_s, duration_s, frames, video_fps, notes = self._render_track(
            input_path, open_sink, stage, synth, timer, progress
        )
        levelling = opened[0].levelling if isinstance(opened[0], LevelledSink) else None
        notes = (*notes, *opened[0].notes)
        timer.seconds["total"] = time.perf_counter() - started
        return RenderResult(
            output=output_path,
            format=options.format,
            sample_rate=options.sample_rate,
            start_s=start_s,
            duration_s=duration_s,
            frames=frames,
            tier=self.tier.name,
            model_version=self.tier.version,
            timings=dict(timer.seconds),
            reuse=synth.reuse,
            markers=synth.markers,
            levelling=levelling,
            video_fps=video_fps,
            warnings=notes,
        )

    def _synth(self, timer: StageTimer) -> ClipSynth:
        if isinstance(self.tier, ContactTier):
            return ContactSynth(self.tier, self.backend, timer=timer)
        if isinstance(self.tier, MotionTier):
            return MotionSynth(self.tier, self.backend, timer=timer)
        return FrameRateSynth(
            self.tier,
            StreamingSynth(
                self.tier,
                self.backend,
                timer=timer,
                static_threshold=self.settings.static_threshold,
                memo=self.memo,
            ),
        )

    def _check(self, options: RenderOptions) -> None:
        if options.sample_rate not in SAMPLE_RATES:
            raise InvalidInput(
                f"sample_rate must be one of {SAMPLE_RATES}", code="invalid_sample_rate"
            )
        if options.tier not in (None, self.tier.name):
            raise InvalidInput(
                f"tier {echo(options.tier)} is not loaded (loaded: {self.tier.name})",
                code="unknown_tier",
            )

    def _open_sink(
        self, input_path: Path, output_path: Path, options: RenderOptions, start_s: float
    ) -> Sink:
        if options.format in AUDIO_FORMATS:
            return AudioWriter(
                output_path,
                options.format,
                in_rate=self.tier.sample_rate,
                out_rate=options.sample_rate,
            )
        return FoleyMuxer(
            input_path,
            output_path,
            container=options.format,
            start_s=start_s,
            in_rate=self.tier.sample_rate,
            out_rate=options.sample_rate,
            replace_audio=options.replace_audio,
        )

    def _render_track(
        self,
        input_path: Path,
        open_sink: Callable[[float], Sink],
        stage: str,
        synth: ClipSynth,
        timer: StageTimer,
        progress: ProgressFn | None,
    ) -> tuple[float, float, int, float, tuple[str, ...]]:
        """Decode, synthesise with `synth` and hand the track to the sink that `open_sink(start_s)`
        opens once the first frame's time is known; `stage` names the sink's time. -> (start s,
        duration s, frames decoded, the video's average frame rate, what was wrong with the file
        and worked around)."""
        tier = self.tier
        letterbox = tier.letterbox
        with (
            open_video(
                input_path,
                width=tier.width,
                height=tier.height,
                limits=self.limits,
                letterbox=letterbox,
            ) as stream,
            contextlib.ExitStack() as closing,
        ):
            sink: Sink | None = None
            declared = max(stream.info.duration_s, 1e-3)
            batches = iter(stream)
            while True:
                with timer("decode"):
                    batch = next(batches, None)
                if batch is None:
                    break
                chunks = synth.push(batch.pts_s, batch.rgb)
                if sink is None and synth.t0 is not None:
                    with timer(stage):
                        sink = closing.enter_context(open_sink(synth.t0))
                if sink is not None:
                    _write(chunks, sink, stage, timer)
                if progress is not None and synth.t0 is not None:
                    progress(min(1.0, (float(batch.pts_s[-1]) - synth.t0) / declared))
            if sink is None or synth.t0 is None:
                raise MediaError("the video stream has no decodable frames", code="no_frames")
            duration_s, notes = _extent(stream, synth.t0)
            _write(synth.finish(duration_s), sink, stage, timer)
            frames_decoded = stream.frames
            with timer(stage):
                closing.close()
        if progress is not None:
            progress(1.0)
        return synth.t0, duration_s, frames_decoded, stream.info.fps, notes


def _extent(stream: decode.DecodeStream, t0: float) -> tuple[float, tuple[str, ...]]:
    """The track's duration and the file's damage notes: frames that stop well short of what a
    damaged file (or a video stream's own header) declares leave the track as long as the
    video, silent after its last frame."""
    duration_s, notes = stream.end_s - t0, stream.notes
    declared = stream.info.duration_s
    if declared - duration_s > CUT_SHORT_S and (notes or stream.info.own_duration):
        notes = (
            *notes,
            f"the frames end at {duration_s:.2f} s of the {declared:.2f} s the file declares: "
            "the track runs on, silent",
        )
        duration_s = declared
    return duration_s, notes


class ClipSynth(Protocol):
    """A clip's stream, whatever the tier: decoded frames (pts s, rgb at the tier's size) in,
    audio chunks out, sample 0 at the first frame (`t0`, known after the first push)."""

    t0: float | None
    reuse: ReuseStats

    @property
    def markers(self) -> tuple[ContactMarker, ...]: ...

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[np.ndarray]: ...

    def finish(self, duration_s: float) -> Iterator[np.ndarray]: ...


class FrameRateSynth:
    """A frame-rate tier (kind "frames"): frames resampled to the model's rate, then its stages."""

    def __init__(self, tier: TierConfig, synth: StreamingSynth) -> None:
        self.tier, self.synth = tier, synth
        self.resampler = FrameResampler(tier.fps)
        self.reuse = synth.runner.reuse

    @property
    def t0(self) -> float | None:
        return self.resampler.t0

    @property
    def markers(self) -> tuple[ContactMarker, ...]:
        # The generator tells when, not how hard or what material.
        return tuple(ContactMarker(t) for t in self.synth.event_times_s)

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[np.ndarray]:
        """In bounded pieces (a source that holds one frame for minutes is minutes of model
        frames, made and voiced a piece at a time), lazily; `t0` is known on return."""
        return self._voiced(self.resampler.chunks(pts_s, rgb))

    def _voiced(self, pieces: Iterator[ModelFrames]) -> Iterator[np.ndarray]:
        for frames in pieces:
            yield from self.synth.push(frames)

    def finish(self, duration_s: float) -> Iterator[np.ndarray]:
        num_frames = self.tier.num_frames(duration_s)
        for frames in self.resampler.finish_chunks(num_frames):
            yield from self.synth.push(frames)
        yield from self.synth.finish(num_frames, self.tier.num_samples(duration_s))


def _write(chunks: Iterator[np.ndarray], sink: Sink, stage: str, timer: StageTimer) -> None:
    """Write audio chunks as the synthesizer yields them; only the writing counts as `stage`
    (the synthesizer times its own stages)."""
    for chunk in chunks:
        with timer(stage):
            sink.write(chunk)
