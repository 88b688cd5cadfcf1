"""The evaluation clips: simulated scenes encoded as real videos, with what they are scored on.

Two kinds of clip from pybullet:
- scenes of the fresh (training distribution, unseen seeds) or held-out (cameras, shapes and
  sizes never trained on) sets, at one of `FRAME_RATES` (variable frame rate included);
- controls, where nothing should sound but a contact: a static scene under a still camera
  ("static"), the same filmed by a moving camera ("camera"), an object in free flight
  ("freefall") and two scenes spliced by a shot cut ("cut").
Each comes with its ground-truth track and its `Reference` (engines.eval.reference).

And sprite clips (engines.sim.sprites, seeds from SPRITE_SEED_BASE on, never trained on), each
encoded at its own frame times, rate, size and cuts as drawn: the contact kinds (strike, drop)
are scenes, the kinds without a contact to voice (SPRITE_NEGATIVE_KINDS) are the hard negatives.
They have no soundtrack; their reference is the generator's own labels (`sprite_reference`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from engines.audio.render import synthesize
from engines.data.clips import NTSC, VFR_TIME_BASE, encode_frames, variable_frame_times
from engines.eval.onsets import Reference
from engines.eval.reference import MERGE_S, contacts, required_reference
from engines.sim import SimClip, scene_from_seed, simulate
from engines.sim.scene import SceneSpec
from engines.sim.sprites import SpriteClip, SpriteContact, sample_clip

# Label -> (nominal rate, variable): every rate a user's footage commonly has.
FRAME_RATES: dict[str, tuple[Fraction, bool]] = {
    "24": (Fraction(24), False),
    "25": (Fraction(25), False),
    "29.97": (NTSC["29.97"], False),
    "30": (Fraction(30), False),
    "50": (Fraction(50), False),
    "60": (Fraction(60), False),
    "vfr": (Fraction(30), True),
}
CONTROL_KINDS: tuple[str, ...] = ("static", "camera", "freefall", "cut")
CUT_SCENE_KINDS: tuple[str, ...] = ("drop", "roll", "multi", "slide")
CUT_WINDOW_S = 0.25  # a false onset this soon after a cut voices the cut
SAMPLE_RATE = 48000
# Sprite kinds in the order a set takes them, so that a set of seven holds every one.
SPRITE_KINDS: tuple[str, ...] = ("strike", "drop", "swing", "camera", "pass", "wobble", "static")
SPRITE_NEGATIVE_KINDS: tuple[str, ...] = ("swing", "camera", "pass", "wobble", "static")
SPRITE_SEED_BASE = 5_000_000  # sprite training draws seeds below 1,000,000
SPRITE_CUT_WINDOW_S = 0.1  # a false onset this soon after a sprite clip's cut voices it


@dataclass(frozen=True)
class EvalClip:
    """A video to render and what its render is scored against.

    truth: the ground-truth track (SAMPLE_RATE), from the first frame on; None: no soundtrack
        (sprite clips).
    reference: the required and don't-care onsets.
    contacts_s: every simulated contact time (sorted), for "no sound before the first contact".
    spurious_span_s: where a false onset counts as spurious, per minute: a control's whole
        clip; for a "cut" control (two scenes with contacts), the CUT_WINDOW_S after the cut;
        nothing for a scene.
    cut_s: where the shot cut is, for clips with one; a false onset within cut_window_s after
        it voices the cut.
    """

    name: str
    kind: str  # the scene kind, or the control kind
    rate: str  # a FRAME_RATES label, or the rate of a sprite clip (`rate_label`)
    video: Path
    truth: np.ndarray | None
    reference: Reference
    contacts_s: np.ndarray
    duration_s: float
    control: bool = False
    spurious_span_s: tuple[float, float] = (0.0, 0.0)
    cut_s: float | None = None
    cut_window_s: float = CUT_WINDOW_S


def eval_set(
    work: Path,
    *,
    clips: int,
    controls: int,
    seed: int,
    control_seed: int,
    holdout: bool,
    duration_s: float,
    size: tuple[int, int],
    rates: tuple[str, ...] = tuple(FRAME_RATES),
) -> Iterator[EvalClip]:
    """`clips` scenes from `seed` on and `controls` control clips from `control_seed` on, the
    frame rates and control kinds taken in turn, made one at a time in `work`."""
    kw = {"holdout": holdout, "duration_s": duration_s, "size": size}
    for i in range(clips):
        yield scene_clip(seed + i, rates[i % len(rates)], work, **kw)
    for i in range(controls):
        kind = CONTROL_KINDS[i % len(CONTROL_KINDS)]
        yield control_clip(kind, control_seed + i, rates[i % len(rates)], work, **kw)


def scene_clip(
    seed: int,
    rate: str,
    workdir: Path,
    *,
    holdout: bool,
    duration_s: float,
    size: tuple[int, int],
    kind: str | None = None,
) -> EvalClip:
    """The scene of `seed` (of the fresh or held-out set) filmed at `rate`."""
    spec = scene_from_seed(seed, kind=kind, holdout=holdout)
    clip = film(spec, seed, rate, duration_s, size, workdir / f"scene_{seed}.mp4")
    return _scored(f"scene {seed}", spec.kind, rate, clip, seed, workdir / f"scene_{seed}.mp4")


def control_clip(
    kind: str,
    seed: int,
    rate: str,
    workdir: Path,
    *,
    holdout: bool,
    duration_s: float,
    size: tuple[int, int],
) -> EvalClip:
    """A control clip of `kind` (CONTROL_KINDS) from `seed`."""
    video = workdir / f"{kind}_{seed}.mp4"
    name = f"{kind} {seed}"
    if kind == "cut":
        return _cut_clip(name, seed, rate, video, holdout, duration_s, size)
    scene_kind = "freefall" if kind == "freefall" else "static"
    spec = scene_from_seed(seed, kind=scene_kind, holdout=holdout)
    if kind in ("static", "camera"):
        rng = np.random.default_rng([seed, 29])
        moving = kind == "camera"
        yaw_rate = float(rng.choice([-1, 1]) * rng.uniform(6, 15)) if moving else 0.0
        dolly = float(rng.uniform(-0.06, 0.06)) * spec.camera.distance if moving else 0.0
        camera = replace(spec.camera, yaw_rate_dps=yaw_rate, distance_rate_mps=dolly)
        spec = replace(spec, camera=camera)
    clip = film(spec, seed, rate, duration_s, size, video)
    scored = _scored(name, kind, rate, clip, seed, video)
    return replace(scored, control=True, spurious_span_s=(0.0, scored.duration_s))


def film(
    spec: SceneSpec,
    seed: int,
    rate: str,
    duration_s: float,
    size: tuple[int, int],
    video: Path | None,
) -> SimClip:
    """Simulate `spec` at `rate` and, where `video` is given, encode it there (H.264)."""
    fps, variable = FRAME_RATES[rate]
    times = variable_frame_times(duration_s, fps, seed) if variable else None
    clip = simulate(
        spec, duration_s=duration_s, fps=fps, width=size[0], height=size[1], frame_times=times
    )
    if video is not None:
        encode_frames(video, clip.frames, fps, times=times)
    return clip


def _scored(name: str, kind: str, rate: str, clip: SimClip, seed: int, video: Path) -> EvalClip:
    return EvalClip(
        name=name,
        kind=kind,
        rate=rate,
        video=video,
        truth=synthesize(clip, sample_rate=SAMPLE_RATE, seed=seed),
        reference=required_reference(clip, sample_rate=SAMPLE_RATE, seed=seed),
        contacts_s=contact_times(clip),
        duration_s=clip.duration_s,
    )


def contact_times(clip: SimClip) -> np.ndarray:
    return np.asarray([c.time_s for c in contacts(clip)], float)


def _cut_clip(
    name: str,
    seed: int,
    rate: str,
    video: Path,
    holdout: bool,
    duration_s: float,
    size: tuple[int, int],
) -> EvalClip:
    """Two scenes of the set spliced at the frame nearest the middle: the first scene's frames
    up to the cut, then the second's from its own start. Frame times stay those of one
    recording (the second scene's are shifted to follow on)."""
    rng = np.random.default_rng([seed, 31])
    kinds = [CUT_SCENE_KINDS[int(i)] for i in rng.integers(len(CUT_SCENE_KINDS), size=2)]
    first = film(
        scene_from_seed(seed, kind=kinds[0], holdout=holdout), seed, rate, duration_s, size, None
    )
    n_cut = int(np.searchsorted(first.times_s, duration_s / 2))
    cut_s = float(first.times_s[n_cut])
    second_seed = seed + 7919
    second = film(
        scene_from_seed(second_seed, kind=kinds[1], holdout=holdout),
        second_seed,
        rate,
        duration_s - cut_s,
        size,
        None,
    )
    head = truncated(first, n_cut)
    frames = np.concatenate([head.frames, second.frames])
    fps, variable = FRAME_RATES[rate]
    times = None
    if variable:
        shift = stamped([cut_s])[0]
        times = stamped(first.times_s[:n_cut]) + [shift + t for t in stamped(second.times_s)]
    encode_frames(video, frames, fps, times=times)
    n_cut_samples = round(cut_s * SAMPLE_RATE)
    truth = np.concatenate(
        [
            synthesize(first, sample_rate=SAMPLE_RATE, seed=seed)[:n_cut_samples],
            synthesize(second, sample_rate=SAMPLE_RATE, seed=second_seed),
        ]
    )
    a = required_reference(head, sample_rate=SAMPLE_RATE, seed=seed)
    b = required_reference(second, sample_rate=SAMPLE_RATE, seed=second_seed)
    return EvalClip(
        name=name,
        kind="cut",
        rate=rate,
        video=video,
        truth=truth,
        reference=Reference(
            np.concatenate([a.required, b.required + cut_s]),
            np.concatenate([a.dont_care, b.dont_care + cut_s]),
        ),
        contacts_s=np.concatenate([contact_times(head), contact_times(second) + cut_s]),
        duration_s=cut_s + second.duration_s,
        control=True,
        spurious_span_s=(cut_s, cut_s + CUT_WINDOW_S),
        cut_s=cut_s,
    )


def stamped(times_s: np.ndarray | list[float]) -> list[Fraction]:
    """Frame times on the VFR_TIME_BASE grid `encode_frames` stamps variable-rate frames on."""
    ticks = VFR_TIME_BASE.denominator
    return [Fraction(round(t * ticks), ticks) for t in times_s]


def truncated(clip: SimClip, frames: int) -> SimClip:
    """The clip's first `frames` frames and what happens before the next one would show."""
    end = float(clip.times_s[frames]) if frames < len(clip.times_s) else clip.duration_s
    return replace(
        clip,
        frames=clip.frames[:frames],
        times_s=clip.times_s[:frames],
        screen_xy=clip.screen_xy[:frames],
        duration_s=end,
        impacts=[i for i in clip.impacts if i.time_s < end],
    )


def sprite_set(
    work: Path, *, clips: int, controls: int, seed: int, control_seed: int, duration_s: float
) -> Iterator[EvalClip]:
    """`clips` sprite clips from `seed` on, SPRITE_KINDS in turn, and `controls` more hard
    negatives from `control_seed` on, SPRITE_NEGATIVE_KINDS in turn, made one at a time."""
    for i in range(clips):
        yield sprite_clip(seed + i, SPRITE_KINDS[i % len(SPRITE_KINDS)], work, duration_s)
    for i in range(controls):
        kind = SPRITE_NEGATIVE_KINDS[i % len(SPRITE_NEGATIVE_KINDS)]
        yield sprite_clip(control_seed + i, kind, work, duration_s)


def sprite_clip(seed: int, kind: str, workdir: Path, duration_s: float) -> EvalClip:
    """The sprite clip of `seed` and `kind`, encoded as H.264 at its own frame times (variable
    rate kept), size and cuts, as drawn."""
    clip = sample_clip(seed, kind=kind, duration_s=duration_s)
    video = workdir / f"sprite_{seed}.mp4"
    nominal = Fraction(1 / float(np.median(np.diff(clip.times_s)))).limit_denominator(1001)
    encode_frames(video, clip.frames, nominal, times=stamped(clip.times_s))
    control = kind in SPRITE_NEGATIVE_KINDS
    return EvalClip(
        name=f"{kind} {seed}",
        kind=kind,
        rate=rate_label(clip.times_s),
        video=video,
        truth=None,
        reference=sprite_reference(clip.contacts),
        contacts_s=np.asarray([c.time_s for c in clip.contacts], float),
        duration_s=clip.duration_s,
        control=control,
        spurious_span_s=(0.0, clip.duration_s if control else 0.0),
        cut_s=sprite_cut_s(clip),
        cut_window_s=SPRITE_CUT_WINDOW_S,
    )


def sprite_reference(found: tuple[SpriteContact, ...]) -> Reference:
    """The contacts labelled required, merged within MERGE_S (the first kept, as
    `required_reference` merges); every other contact is don't-care."""
    required: list[float] = []
    dont_care: list[float] = []
    for contact in found:
        if contact.required and not (required and contact.time_s - required[-1] < MERGE_S):
            required.append(contact.time_s)
        else:
            dont_care.append(contact.time_s)
    return Reference(np.asarray(required, float), np.asarray(dont_care, float))


def sprite_cut_s(clip: SpriteClip) -> float | None:
    """The time of the clip's shot cut, None without one: halfway between the last frame of
    the first shot and the first of the second, where the generator starts the second shot."""
    assert len(clip.cuts) <= 1, f"sprite clip {clip.seed}: more than one cut"
    if not clip.cuts:
        return None
    k = clip.cuts[0]
    return float(clip.times_s[k - 1] + clip.times_s[k]) / 2


def rate_label(times_s: np.ndarray) -> str:
    """A FRAME_RATES label for frame times: "vfr" where the intervals vary (jitter, dropped
    frames), else the label of a regular rate, else the rate itself ("15", "43.7")."""
    steps = np.diff(times_s)
    median = float(np.median(steps))
    if np.ptp(steps) > 1e-3 * median:
        return "vfr"
    fps = 1 / median
    for label, (rate, variable) in FRAME_RATES.items():
        if not variable and abs(float(rate) - fps) < 1e-3:
            return label
    return f"{fps:.3g}"
