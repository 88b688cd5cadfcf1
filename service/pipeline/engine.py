"""FoleyEngine: loads a tier once and renders clips with it; what every transport calls.

    decode (child process) -> preprocess -> encoder -> generator -> vocoder -> write / mux

Thread-safety: `render` may be called from several worker threads at once. Each call has its own
decode process, resampler, synthesizer and writer; the shared state is the backend, whose
sessions are safe to run concurrently (see its docstring). Nothing per-request is stored on self.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from service.config import Settings
from service.errors import InvalidInput, MediaError
from service.media import decode
from service.media.audio_out import AudioWriter
from service.media.decode import DecodeLimits, open_video
from service.media.mux import mux_audio_into_video
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contract import TierConfig, load_tier
from service.pipeline.offline import OfflineSynth, StageTimer
from service.pipeline.preprocess import FrameResampler, ModelFrames
from service.pipeline.types import (
    AUDIO_FORMATS,
    SAMPLE_RATES,
    ProgressFn,
    RenderOptions,
    RenderResult,
)

log = logging.getLogger(__name__)


class FoleyEngine:
    def __init__(self, settings: Settings, tier: TierConfig, backend: Backend) -> None:
        self.settings = settings
        self.tier = tier
        self.backend = backend
        self.limits = DecodeLimits.from_settings(settings)

    @classmethod
    def load(cls, settings: Settings) -> FoleyEngine:
        tier = load_tier(settings.models_dir, settings.default_tier)
        backend = create_backend(settings.backend, tier, threads=settings.intra_op_threads)
        log.info("loaded tier %s %s on %s", tier.name, tier.version, backend.name)
        return cls(settings, tier, backend)

    def warmup(self) -> None:
        """Start the decoder's forkserver and run one short inference through every stage, so
        the first request pays no first-run cost."""
        decode.warm_up()
        n = self.tier.left_context_frames + self.tier.right_context_frames + 2
        frames = ModelFrames(
            0,
            np.zeros((n, self.tier.height, self.tier.width, 3), np.uint8),
            np.zeros(n, np.float32),
        )
        synth = OfflineSynth(self.tier, self.backend)
        list(synth.push(frames))
        list(synth.finish(n, n * self.tier.samples_per_frame))

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
        if options.format in AUDIO_FORMATS:
            start_s, duration_s, frames = self._render_audio(
                input_path, output_path, options.format, options.sample_rate, timer, progress
            )
        else:
            with tempfile.TemporaryDirectory(dir=self.settings.work_dir) as tmp:
                track = Path(tmp) / "foley.wav"
                start_s, duration_s, frames = self._render_audio(
                    input_path, track, "wav", options.sample_rate, timer, progress
                )
                with timer("mux"):
                    mux_audio_into_video(
                        input_path,
                        track,
                        output_path,
                        container=options.format,
                        start_s=start_s,
                        keep_original_audio=options.keep_original_audio,
                    )
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
        )

    def _check(self, options: RenderOptions) -> None:
        if options.sample_rate not in SAMPLE_RATES:
            raise InvalidInput(
                f"sample_rate must be one of {SAMPLE_RATES}", code="invalid_sample_rate"
            )
        if options.tier not in (None, self.tier.name):
            raise InvalidInput(
                f"tier {options.tier!r} is not loaded (loaded: {self.tier.name})",
                code="unknown_tier",
            )

    def _render_audio(
        self,
        input_path: Path,
        output_path: Path,
        fmt: str,
        sample_rate: int,
        timer: StageTimer,
        progress: ProgressFn | None,
    ) -> tuple[float, float, int]:
        tier = self.tier
        resampler = FrameResampler(tier.fps)
        synth = OfflineSynth(tier, self.backend, timer=timer)
        with (
            open_video(
                input_path, width=tier.width, height=tier.height, limits=self.limits
            ) as stream,
            AudioWriter(output_path, fmt, in_rate=tier.sample_rate, out_rate=sample_rate) as writer,
        ):
            declared = max(stream.info.duration_s, 1e-3)
            batches = iter(stream)
            while True:
                with timer("decode"):
                    batch = next(batches, None)
                if batch is None:
                    break
                with timer("preprocess"):
                    frames = resampler.push(batch.pts_s, batch.rgb)
                if frames is not None:
                    _write(synth.push(frames), writer, timer)
                if progress is not None and resampler.t0 is not None:
                    progress(min(1.0, (float(batch.pts_s[-1]) - resampler.t0) / declared))
            if resampler.t0 is None:
                raise MediaError("the video stream has no decodable frames", code="no_frames")
            duration_s = stream.end_s - resampler.t0
            num_frames = tier.num_frames(duration_s)
            rest = resampler.finish(num_frames)
            if rest is not None:
                _write(synth.push(rest), writer, timer)
            _write(synth.finish(num_frames, tier.num_samples(duration_s)), writer, timer)
            frames_decoded = stream.frames
        if progress is not None:
            progress(1.0)
        return resampler.t0, duration_s, frames_decoded


def _write(chunks: Iterator[np.ndarray], writer: AudioWriter, timer: StageTimer) -> None:
    """Write audio chunks as the synthesizer yields them; only the writing counts as `write`
    (the synthesizer times its own stages)."""
    for chunk in chunks:
        with timer("write"):
            writer.write(chunk)
