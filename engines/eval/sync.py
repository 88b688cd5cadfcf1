"""Sync evaluation on freshly simulated clips, through the real service path.

    python -m engines.eval.sync [--scenes holdout|fresh|sprites] [--clips 28] [--controls 8]

Each clip (engines.eval.scenes) is simulated from a seed never trained on, at one of the frame
rates users bring (24, 25, 29.97, 30, 50, 60 fps and variable), encoded as a real H.264 file and
rendered by FoleyEngine exactly as `foley generate` does. `--scenes sprites`: sprite clips
(engines.sim.sprites) instead, the kinds in turn, each at its own frame times, size and cuts,
labelled by the generator. Scored against the required onsets, +-50 ms, one-to-one:
- fired: the generator's own event times (RenderResult.events_s);
- rendered: the onsets the detector hears in the rendered track;
- the share of fired events heard in their own render, and the render's offset from them;
- the true track: the simulator's own soundtrack scored as a render. Contacts that are
  required (audible on their own) can still be masked in a physical mix, mostly by the ring of
  an earlier hit, so this is the rendered score a faithful render of exactly the right events
  would get: the ceiling the rendered row is read against (pybullet scenes only);
- clicks: a clean click at every required onset, detected back and scored as a render: what
  the detector itself allows, beside every rendered score (sprite clips have no soundtrack,
  so it is their only ceiling);
- masking fidelity: the rendered onsets against the contacts heard in the true mix (it asks
  whether the track masks what the truth masks, not whether contacts are found; pybullet only);
- controls (static, camera-only motion, free fall, shot cuts; for sprites the kinds with no
  contact to voice: swing, camera, pass, wobble, static): spurious onsets per minute, per kind;
- on every clip with a shot cut, whether it is voiced (a false onset just after it), and
  onsets before the first contact.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import av
import numpy as np

from engines.audio.render import synthesize
from engines.data.clips import write_video_clip
from engines.eval.onsets import (
    OnsetScore,
    Reference,
    detect_onsets,
    false_onsets,
    match_onsets,
    matched_pairs,
    score_onsets,
)
from engines.eval.onsets import combined as combined  # re-exported: tests pool scores with it
from engines.eval.realclips import click_track
from engines.eval.reference import audible
from engines.eval.scenes import (
    FRAME_RATES,
    SAMPLE_RATE,
    SPRITE_SEED_BASE,
    EvalClip,
    eval_set,
    sprite_set,
)
from engines.eval.sync_summary import ClipResult, summary
from engines.sim.types import SimClip
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
FPS_CHOICES = (24, 25, 30, 60)
HOLDOUT_SEED_BASE = 1_000_000  # far from the training seeds
CONTROL_SEED_OFFSET = 500_000  # the controls' seeds, apart from the scenes'
TOLERANCE_S = 0.05
SCENE_SETS = ("holdout", "fresh", "sprites")


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
    engine.render(video, out, RenderOptions(format="wav", loudness=None))
    generated, rate = read_audio(out)
    return RenderedClip(clip, truth, generated, rate)


def score(
    clip: EvalClip, generated: np.ndarray, sample_rate: int, events_s: np.ndarray
) -> ClipResult:
    """Score one render: its track (at `sample_rate`) and the events it fired."""
    detected = detect_onsets(generated, sample_rate)
    events_s = np.asarray(events_s, float)
    pairs = matched_pairs(detected, events_s, TOLERANCE_S)
    first = clip.contacts_s[0] if len(clip.contacts_s) else np.inf
    span = clip.spurious_span_s
    false = false_onsets(detected, clip.reference, TOLERANCE_S)
    cut = None if clip.cut_s is None else (clip.cut_s, clip.cut_s + clip.cut_window_s)
    truth = masking = None
    if clip.truth is not None:
        truth = score_onsets(detect_onsets(clip.truth, SAMPLE_RATE), clip.reference, TOLERANCE_S)
        masking = match_onsets(detected, reference_onsets_of(clip), TOLERANCE_S)
    return ClipResult(
        name=clip.name,
        kind=clip.kind,
        rate=clip.rate,
        control=clip.control,
        duration_s=clip.duration_s,
        fired=score_onsets(events_s, clip.reference, TOLERANCE_S),
        rendered=score_onsets(detected, clip.reference, TOLERANCE_S),
        truth=truth,
        clicks=clicks(clip.reference, clip.duration_s),
        masking=masking,
        events=len(events_s),
        heard=len(pairs),
        render_offsets_s=np.asarray([detected[i] - events_s[j] for i, j in pairs], float),
        early=int(np.sum(detected < first - TOLERANCE_S)),
        spurious=_in_span(false, span),
        spurious_fired=_in_span(false_onsets(events_s, clip.reference, TOLERANCE_S), span),
        span_s=span[1] - span[0],
        cut_voiced=None if cut is None else _in_span(false, cut) > 0,
    )


def clicks(reference: Reference, duration_s: float) -> OnsetScore:
    """A clean click at every required onset, detected back and scored as a render: the most a
    render whose events are exactly right can score through the onset detector."""
    track = click_track(reference.required, round(duration_s * SAMPLE_RATE), SAMPLE_RATE)
    return score_onsets(detect_onsets(track, SAMPLE_RATE), reference, TOLERANCE_S)


def _in_span(times: np.ndarray, span: tuple[float, float]) -> int:
    return int(np.sum((times >= span[0]) & (times < span[1])))


def reference_onsets_of(clip: EvalClip) -> np.ndarray:
    """The contacts heard in the clip's true mix (the masking-fidelity reference)."""
    assert clip.truth is not None, f"{clip.name} has no true mix"
    return audible(clip.contacts_s, clip.truth, SAMPLE_RATE)


def render(engine: FoleyEngine, clip: EvalClip) -> ClipResult:
    """Render `clip` as `foley generate` does and score it. Each clip is the first its engine
    renders (a fresh cache): windows and templates kept from other clips would make a clip's
    score depend on the order of the set."""
    engine = FoleyEngine(engine.settings, engine.tier, engine.backend)
    out = clip.video.with_suffix(".wav")
    result = engine.render(clip.video, out, RenderOptions(format="wav", loudness=None))
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
    pybullet = partial(eval_set, holdout=holdout, size=size, rates=rates)
    return evaluate_set(
        engine, pybullet, clips=clips, controls=controls, seed=seed, duration_s=duration_s
    )


def evaluate_set(
    engine: FoleyEngine,
    make_set: Callable[..., Iterable[EvalClip]],
    *,
    clips: int,
    controls: int,
    seed: int,
    duration_s: float,
) -> list[ClipResult]:
    """The clips `make_set` makes in a temporary folder (`sprite_set`: the sprite clips, their
    seeds from SPRITE_SEED_BASE on), the controls' seeds from seed + CONTROL_SEED_OFFSET on,
    each rendered and scored."""
    with tempfile.TemporaryDirectory() as tmp:
        made = make_set(
            Path(tmp),
            clips=clips,
            controls=controls,
            seed=seed,
            control_seed=seed + CONTROL_SEED_OFFSET,
            duration_s=duration_s,
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clips", type=int, default=28, help="scenes (frame rates, or sprite kinds, in turn)"
    )
    parser.add_argument(
        "--controls",
        type=int,
        default=8,
        help="control clips (kinds in turn; sprites: more hard negatives)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"the first seed (default {HOLDOUT_SEED_BASE}; sprites: {SPRITE_SEED_BASE}, "
        "never less)",
    )
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument(
        "--scenes",
        choices=SCENE_SETS,
        default="holdout",
        help="holdout: shapes, sizes and cameras never used in training; "
        "fresh: the training distribution with unseen seeds; "
        "sprites: procedural clips with unseen seeds, each at its own rate, size and cuts",
    )
    parser.add_argument("--rates", nargs="+", choices=tuple(FRAME_RATES), default=None)
    parser.add_argument(
        "--tier", default=None, help="the tier to render with (default: FOLEY_DEFAULT_TIER)"
    )
    args = parser.parse_args(argv)
    sprites = args.scenes == "sprites"
    if sprites and args.rates:
        parser.error("--rates: sprite clips keep the frame times they are drawn with")
    if sprites and args.seed is not None and args.seed < SPRITE_SEED_BASE:
        parser.error(f"--seed: sprite seeds below {SPRITE_SEED_BASE} may have been trained on")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    engine = FoleyEngine.load(Settings(), args.tier)
    if sprites:
        results = evaluate_set(
            engine,
            sprite_set,
            clips=args.clips,
            controls=args.controls,
            seed=SPRITE_SEED_BASE if args.seed is None else args.seed,
            duration_s=args.duration,
        )
    else:
        results = evaluate(
            engine,
            clips=args.clips,
            controls=args.controls,
            seed=HOLDOUT_SEED_BASE if args.seed is None else args.seed,
            duration_s=args.duration,
            holdout=args.scenes == "holdout",
            rates=tuple(args.rates or FRAME_RATES),
        )
    print(summary(results))


if __name__ == "__main__":
    main()
