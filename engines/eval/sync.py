"""Sync evaluation on freshly simulated clips, through the real service path.

    python -m engines.eval.sync [--scenes holdout|fresh] [--clips 28] [--controls 8]

Each clip (engines.eval.scenes) is simulated from a seed never trained on, at one of the frame
rates users bring (24, 25, 29.97, 30, 50, 60 fps and variable), encoded as a real H.264 file and
rendered by FoleyEngine exactly as `foley generate` does. Scored against the required onsets
(engines.eval.reference), +-50 ms, one-to-one:
- fired: the generator's own event times (RenderResult.events_s);
- rendered: the onsets the detector hears in the rendered track;
- the share of fired events heard in their own render, and the render's offset from them;
- the true track: the simulator's own soundtrack scored as a render. Contacts that are
  required (audible on their own) can still be masked in a physical mix, mostly by the ring of
  an earlier hit, so this is the rendered score a faithful render of exactly the right events
  would get: the ceiling the rendered row is read against;
- masking fidelity: the rendered onsets against the contacts heard in the true mix (it asks
  whether the track masks what the truth masks, not whether contacts are found);
- controls (static, camera-only motion, free fall, shot cuts): spurious onsets per minute, and
  whether a cut is voiced; on every clip, onsets before the first contact.
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
from engines.eval.onsets import (
    OnsetScore,
    combined,
    detect_onsets,
    false_onsets,
    match_onsets,
    matched_pairs,
    score_onsets,
)
from engines.eval.reference import audible
from engines.eval.scenes import CONTROL_KINDS, FRAME_RATES, SAMPLE_RATE, EvalClip, eval_set
from engines.sim.types import SimClip
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
FPS_CHOICES = (24, 25, 30, 60)
HOLDOUT_SEED_BASE = 1_000_000  # far from the training seeds
CONTROL_SEED_OFFSET = 500_000  # the controls' seeds, apart from the scenes'
TOLERANCE_S = 0.05
CUT_WINDOW_S = 0.25  # a false onset this soon after a cut voices the cut


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
    engine.render(video, out, RenderOptions(format="wav", loudness_lufs=None))
    generated, rate = read_audio(out)
    return RenderedClip(clip, truth, generated, rate)


@dataclass(frozen=True)
class ClipResult:
    """One clip's scores (see the module docstring)."""

    name: str
    kind: str
    rate: str
    control: bool
    duration_s: float
    fired: OnsetScore
    rendered: OnsetScore
    truth: OnsetScore  # the simulator's own track, scored as a render
    masking: OnsetScore
    events: int  # fired events
    heard: int  # fired events with a rendered onset within TOLERANCE_S
    render_offsets_s: np.ndarray  # rendered onset - fired event, per heard event
    early: int  # rendered onsets more than TOLERANCE_S before the first contact
    # Controls: false rendered (and fired) onsets over the span where only a contact may sound
    # (the whole clip; for a cut, the CUT_WINDOW_S after it) and that span's length.
    spurious: int
    spurious_fired: int
    span_s: float
    cut_voiced: bool | None  # cut clips: a false rendered onset within CUT_WINDOW_S after it


def score(
    clip: EvalClip, generated: np.ndarray, sample_rate: int, events_s: np.ndarray
) -> ClipResult:
    """Score one render: its track (at `sample_rate`) and the events it fired."""
    detected = detect_onsets(generated, sample_rate)
    events_s = np.asarray(events_s, float)
    pairs = matched_pairs(detected, events_s, TOLERANCE_S)
    first = clip.contacts_s[0] if len(clip.contacts_s) else np.inf
    span = (0.0, clip.duration_s if clip.control else 0.0)
    if clip.cut_s is not None:
        span = (clip.cut_s, clip.cut_s + CUT_WINDOW_S)
    spurious = _in_span(false_onsets(detected, clip.reference, TOLERANCE_S), span)
    return ClipResult(
        name=clip.name,
        kind=clip.kind,
        rate=clip.rate,
        control=clip.control,
        duration_s=clip.duration_s,
        fired=score_onsets(events_s, clip.reference, TOLERANCE_S),
        rendered=score_onsets(detected, clip.reference, TOLERANCE_S),
        truth=score_onsets(detect_onsets(clip.truth, SAMPLE_RATE), clip.reference, TOLERANCE_S),
        masking=match_onsets(detected, reference_onsets_of(clip), TOLERANCE_S),
        events=len(events_s),
        heard=len(pairs),
        render_offsets_s=np.asarray([detected[i] - events_s[j] for i, j in pairs], float),
        early=int(np.sum(detected < first - TOLERANCE_S)),
        spurious=spurious,
        spurious_fired=_in_span(false_onsets(events_s, clip.reference, TOLERANCE_S), span),
        span_s=span[1] - span[0],
        cut_voiced=None if clip.cut_s is None else spurious > 0,
    )


def _in_span(times: np.ndarray, span: tuple[float, float]) -> int:
    return int(np.sum((times >= span[0]) & (times < span[1])))


def reference_onsets_of(clip: EvalClip) -> np.ndarray:
    """The contacts heard in the clip's true mix (the masking-fidelity reference)."""
    return audible(clip.contacts_s, clip.truth, SAMPLE_RATE)


def render(engine: FoleyEngine, clip: EvalClip) -> ClipResult:
    """Render `clip` as `foley generate` does and score it. Each clip is the first its engine
    renders (a fresh cache): windows and templates kept from other clips would make a clip's
    score depend on the order of the set."""
    engine = FoleyEngine(engine.settings, engine.tier, engine.backend)
    out = clip.video.with_suffix(".wav")
    result = engine.render(clip.video, out, RenderOptions(format="wav", loudness_lufs=None))
    generated, rate = read_audio(out)
    return score(clip, generated, rate, np.asarray(result.events_s))


def evaluate(
    engine: FoleyEngine,
    *,
    clips: int,
    controls: int = 0,
    seed: int = HOLDOUT_SEED_BASE,
    duration_s: float = 5.0,
    holdout: bool = True,
    size: tuple[int, int] = (320, 180),
    rates: tuple[str, ...] = tuple(FRAME_RATES),
) -> list[ClipResult]:
    """`clips` scenes and `controls` control clips, the frame rates and control kinds taken in
    turn, each clip simulated, rendered and scored in a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        made = eval_set(
            Path(tmp),
            clips=clips,
            controls=controls,
            seed=seed,
            control_seed=seed + CONTROL_SEED_OFFSET,
            holdout=holdout,
            duration_s=duration_s,
            size=size,
            rates=rates,
        )
        return [_logged(render(engine, clip)) for clip in made]


def _logged(result: ClipResult) -> ClipResult:
    log.info(
        "%s (%s, %s fps): F1 fired %.2f, rendered %.2f",
        result.name,
        result.kind,
        result.rate,
        result.fired.f1,
        result.rendered.f1,
    )
    return result


def _row(label: str, score: OnsetScore) -> str:
    errors_ms = np.abs(score.errors_s) * 1000
    median = f"{np.median(errors_ms):6.1f}" if len(errors_ms) else "     -"
    within = f"{np.mean(errors_ms <= 10) * 100:5.0f} %" if len(errors_ms) else "      -"
    return (
        f"{label:<22} {score.f1:5.3f} {score.precision:5.3f} {score.recall:5.3f} "
        f"{median} {within}   tp {score.true_positives} fp {score.false_positives} "
        f"fn {score.false_negatives} ignored {score.ignored}"
    )


def summary(results: list[ClipResult]) -> str:
    scenes = [r for r in results if not r.control]
    controls = [r for r in results if r.control]
    lines = []
    if scenes:
        fired = combined([r.fired for r in scenes])
        rendered = combined([r.rendered for r in scenes])
        masking = combined([r.masking for r in scenes])
        required = rendered.true_positives + rendered.false_negatives
        lines += [
            f"scenes: {len(scenes)}   required onsets: {required}",
            f"{'(+-50 ms)':<22} {'F1':>5} {'P':>5} {'R':>5} {'med ms':>6} {'<=10ms':>7}",
            _row("fired events", fired),
            _row("rendered onsets", rendered),
            _row("true track (ceiling)", combined([r.truth for r in scenes])),
            _row("masking fidelity", masking),
        ]
        events = sum(r.events for r in scenes)
        offsets = np.concatenate([r.render_offsets_s for r in scenes]) * 1000
        if events:
            offset = f"{np.median(offsets):+.1f} ms" if len(offsets) else "-"
            lines.append(
                f"fired events heard in their render: {sum(r.heard for r in scenes) / events:.0%}"
                f" of {events}; render offset (median): {offset}"
            )
        lines.append("per frame rate (F1 fired / rendered):")
        for rate in [r for r in FRAME_RATES if any(c.rate == r for c in scenes)]:
            sub = [c for c in scenes if c.rate == rate]
            lines.append(
                f"  {rate:>6}: {combined([c.fired for c in sub]).f1:.3f} / "
                f"{combined([c.rendered for c in sub]).f1:.3f}   ({len(sub)} clips)"
            )
        lines.append("per scene kind (F1 fired / rendered, required onsets):")
        for kind in sorted({c.kind for c in scenes}):
            sub = combined([c.rendered for c in scenes if c.kind == kind])
            lines.append(
                f"  {kind:>8}: {combined([c.fired for c in scenes if c.kind == kind]).f1:.3f}"
                f" / {sub.f1:.3f}   ({sub.true_positives + sub.false_negatives})"
            )
    early = [r for r in results if r.early]
    lines.append(f"clips with onsets before the first contact: {len(early)} of {len(results)}")
    if controls:
        minutes = sum(r.span_s for r in controls) / 60
        spurious = sum(r.spurious for r in controls) / minutes
        fired = sum(r.spurious_fired for r in controls) / minutes
        per_kind = ", ".join(
            f"{kind} {sum(r.spurious for r in controls if r.kind == kind)}"
            for kind in CONTROL_KINDS
            if any(r.kind == kind for r in controls)
        )
        cuts = [r for r in controls if r.cut_voiced is not None]
        lines.append(
            f"controls: {len(controls)} clips, {minutes:.2f} min; spurious onsets per minute: "
            f"rendered {spurious:.2f}, fired {fired:.2f} ({per_kind}); "
            f"cuts voiced: {sum(bool(r.cut_voiced) for r in cuts)} of {len(cuts)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=28, help="scenes (frame rates in turn)")
    parser.add_argument("--controls", type=int, default=8, help="control clips (kinds in turn)")
    parser.add_argument("--seed", type=int, default=HOLDOUT_SEED_BASE)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument(
        "--scenes",
        choices=("holdout", "fresh"),
        default="holdout",
        help="holdout: shapes, sizes and cameras never used in training; "
        "fresh: the training distribution with unseen seeds",
    )
    parser.add_argument("--rates", nargs="+", choices=tuple(FRAME_RATES), default=None)
    parser.add_argument(
        "--tier", default=None, help="the tier to render with (default: FOLEY_DEFAULT_TIER)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = Settings() if args.tier is None else Settings(default_tier=args.tier)
    engine = FoleyEngine.load(settings)
    results = evaluate(
        engine,
        clips=args.clips,
        controls=args.controls,
        seed=args.seed,
        duration_s=args.duration,
        holdout=args.scenes == "holdout",
        rates=tuple(args.rates or FRAME_RATES),
    )
    print(summary(results))


if __name__ == "__main__":
    main()
