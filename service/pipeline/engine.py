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
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

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
from service.pipeline.contract import TierConfig
from service.pipeline.memo import FeatureCache, WindowMemo
from service.pipeline.runner import Piece, Runner, create_runner, gather
from service.pipeline.streaming import Memo, StageTimer
from service.pipeline.tier import Tier, load_tier
from service.pipeline.types import (
    AUDIO_FORMATS,
    ProgressFn,
    RenderOptions,
    RenderResult,
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
        runner = self._runner(StageTimer())
        stream = runner.open()
        start = 0
        for n in (decode.BATCH_FRAMES, 1):
            rgb = np.zeros((n, self.tier.height, self.tier.width, 3), np.uint8)
            gather(runner.push([stream], [(np.arange(start, start + n) / 30.0, rgb)]), 1)
            start += n
        gather(runner.finish([stream], [start / 30.0]), 1)

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
            if options.loudness is not None:
                rate, target = self.tier.sample_rate, options.loudness
                sink = LevelledSink(sink, sample_rate=rate, target_lufs=target)
            opened.append(sink)
            return sink

        runner = self._runner(timer)
        stream = runner.open()
        start_s, duration_s, frames, video_fps, notes = self._render_track(
            input_path, open_sink, stage, runner, stream, timer, progress
        )
        levelling = opened[0].levelling if isinstance(opened[0], LevelledSink) else None
        notes = (*notes, *opened[0].notes)
        timer.seconds["total"] = time.perf_counter() - started
        return RenderResult(
            output=output_path,
            options=replace(options, tier=self.tier.name),
            start_s=start_s,
            duration_s=duration_s,
            frames=frames,
            model_version=self.tier.version,
            timings=dict(timer.seconds),
            reuse=runner.reuse,
            markers=runner.markers(stream),
            levelling=levelling,
            video_fps=video_fps,
            warnings=notes,
        )

    def _runner(self, timer: StageTimer) -> Runner[Any]:
        return create_runner(
            self.tier,
            self.backend,
            timer=timer,
            static_threshold=self.settings.static_threshold,
            memo=self.memo,
        )

    def _check(self, options: RenderOptions) -> None:
        if options.tier not in (None, self.tier.name):
            raise InvalidInput(
                f"tier {echo(options.tier)} is not loaded (loaded: {self.tier.name})",
                code="unknown_tier",
            )

    def _open_sink(
        self, input_path: Path, output_path: Path, options: RenderOptions, start_s: float
    ) -> Sink:
        fmt = options.format
        if fmt == "wav" or fmt == "flac":  # AUDIO_FORMATS, spelled out so that `fmt` narrows
            return AudioWriter(
                output_path,
                fmt,
                in_rate=self.tier.sample_rate,
                out_rate=options.sample_rate,
            )
        return FoleyMuxer(
            input_path,
            output_path,
            container=fmt,
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
        runner: Runner[Any],
        stream: object,
        timer: StageTimer,
        progress: ProgressFn | None,
    ) -> tuple[float, float, int, float, tuple[str, ...]]:
        """Decode, run `stream` of `runner` over the frames and hand the track to the sink that
        `open_sink(start_s)` opens once the first frame's time is known; `stage` names the
        sink's time. -> (start s, duration s, frames decoded, the video's average frame rate,
        what was wrong with the file and worked around)."""
        tier = self.tier
        letterbox = tier.letterbox
        with (
            open_video(
                input_path,
                width=tier.width,
                height=tier.height,
                limits=self.limits,
                letterbox=letterbox,
            ) as video,
            contextlib.ExitStack() as closing,
        ):
            sink: Sink | None = None
            declared = max(video.info.duration_s, 1e-3)
            batches = iter(video)
            while True:
                with timer("decode"):
                    batch = next(batches, None)
                if batch is None:
                    break
                rounds = runner.push([stream], [(batch.pts_s, batch.rgb)])
                t0 = runner.t0(stream)
                if sink is None and t0 is not None:
                    with timer(stage):
                        sink = closing.enter_context(open_sink(t0))
                if sink is not None:
                    _write(rounds, sink, stage, timer)
                if progress is not None and t0 is not None:
                    progress(min(1.0, (float(batch.pts_s[-1]) - t0) / declared))
            t0 = runner.t0(stream)
            if sink is None or t0 is None:
                raise MediaError("the video stream has no decodable frames", code="no_frames")
            duration_s, notes = _extent(video, t0)
            _write(runner.finish([stream], [duration_s]), sink, stage, timer)
            frames_decoded = video.frames
            with timer(stage):
                closing.close()
        if progress is not None:
            progress(1.0)
        return t0, duration_s, frames_decoded, video.info.fps, notes


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


def _write(rounds: Iterable[list[Piece]], sink: Sink, stage: str, timer: StageTimer) -> None:
    """Write the stream's audio as the runner makes it; only the writing counts as `stage` (the
    runner times its own stages)."""
    for (out,) in rounds:
        with timer(stage):
            sink.write(out.audio)
