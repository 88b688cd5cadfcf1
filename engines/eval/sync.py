"""Sync evaluation on freshly simulated clips, through the real service path.

    python -m engines.eval.sync --clips 24

Each clip is simulated from a held-out seed (engines.data: shapes, sizes and cameras not used in
training), encoded as a real H.264 file, rendered by FoleyEngine exactly as `foley generate` does,
and the generated track's onsets are matched against the onsets of the ground-truth track.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from engines.audio.render import synthesize
from engines.data.clips import write_video_clip
from engines.eval.onsets import OnsetScore, combined, detect_onsets, match_onsets
from engines.eval.reference import reference_onsets
from engines.sim.types import SimClip
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
FPS_CHOICES = (24, 25, 30, 60)
HOLDOUT_SEED_BASE = 1_000_000  # far from the training seeds


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples in [-1, 1] and sample rate of an audio file (or a video's first
    audio track), whatever its sample format."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        to_float = av.AudioResampler(format="flt", layout="mono", rate=stream.rate)
        chunks = [
            out.to_ndarray().reshape(-1)
            for frame in [*container.decode(stream), None]
            for out in to_float.resample(frame)
        ]
        rate = stream.rate
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    return samples.astype(np.float32), rate


@dataclass(frozen=True)
class ClipResult:
    seed: int
    fps: int
    kind: str
    score: OnsetScore


@dataclass(frozen=True)
class RenderedClip:
    clip: SimClip  # the ground truth (frames included)
    truth: np.ndarray  # the ground-truth track, 48 kHz
    generated: np.ndarray  # what the service made of the encoded video
    sample_rate: int


def render_clip(
    engine: FoleyEngine,
    seed: int,
    fps: int,
    workdir: Path,
    *,
    duration_s: float = 5.0,
    size: tuple[int, int] = (320, 180),
    holdout: bool = True,
    kind: str | None = None,
) -> RenderedClip:
    """Simulate the scene of `seed`, encode it as H.264 and render it as `foley generate` does."""
    video = workdir / f"clip_{seed}.mp4"
    clip = write_video_clip(
        video,
        seed=seed,
        duration_s=duration_s,
        fps=fps,
        width=size[0],
        height=size[1],
        holdout=holdout,
        kind=kind,
    )
    truth = synthesize(clip, seed=seed)
    out = workdir / f"clip_{seed}.wav"
    engine.render(video, out, RenderOptions(format="wav"))
    generated, rate = read_audio(out)
    return RenderedClip(clip, truth, generated, rate)


def score_clip(r: RenderedClip, seed: int, fps: int) -> ClipResult:
    """The generated track's onsets against the audible contacts of the ground truth."""
    reference = reference_onsets(r.clip, r.truth, 48000)
    score = match_onsets(detect_onsets(r.generated, r.sample_rate), reference)
    return ClipResult(seed, fps, r.clip.spec.kind, score)


def evaluate(
    engine: FoleyEngine,
    *,
    clips: int,
    seed: int = HOLDOUT_SEED_BASE,
    duration_s: float = 5.0,
    holdout: bool = True,
) -> list[ClipResult]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(clips):
            fps = FPS_CHOICES[i % len(FPS_CHOICES)]
            rendered = render_clip(
                engine, seed + i, fps, Path(tmp), duration_s=duration_s, holdout=holdout
            )
            result = score_clip(rendered, seed + i, fps)
            log.info("seed %d %s %d fps: F1 %.2f", result.seed, result.kind, fps, result.score.f1)
            results.append(result)
    return results


def summary(results: list[ClipResult]) -> str:
    total = combined([r.score for r in results])
    errors_ms = np.abs(total.errors_s) * 1000
    lines = [
        f"clips: {len(results)}   reference onsets: {total.true_positives + total.false_negatives}",
        f"onset F1 (+-50 ms): {total.f1:.3f}   precision {total.precision:.3f}   "
        f"recall {total.recall:.3f}",
    ]
    if len(errors_ms):
        lines.append(
            f"timing error: median {np.median(errors_ms):.1f} ms, "
            f"within 10 ms: {np.mean(errors_ms <= 10) * 100:.0f} %"
        )
    for fps in sorted({r.fps for r in results}):
        sub = [r.score for r in results if r.fps == fps]
        lines.append(f"  {fps} fps: F1 {combined(sub).f1:.3f} ({len(sub)} clips)")
    for kind in sorted({r.kind for r in results}):
        score = combined([r.score for r in results if r.kind == kind])
        predicted = score.true_positives + score.false_positives
        reference = score.true_positives + score.false_negatives
        precision = f"{score.precision:.3f}" if predicted else "-"
        recall = f"{score.recall:.3f}" if reference else "-"
        lines.append(
            f"  {kind}: F1 {score.f1:.3f}   precision {precision}   recall {recall}   "
            f"predicted {predicted}   reference {reference}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--seed", type=int, default=HOLDOUT_SEED_BASE)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument(
        "--scenes",
        choices=("holdout", "fresh"),
        default="holdout",
        help="holdout: shapes, sizes and cameras never used in training; "
        "fresh: the training distribution with unseen seeds",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    engine = FoleyEngine.load(Settings())
    results = evaluate(
        engine,
        clips=args.clips,
        seed=args.seed,
        duration_s=args.duration,
        holdout=args.scenes == "holdout",
    )
    print(summary(results))


if __name__ == "__main__":
    main()
