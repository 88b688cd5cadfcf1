"""Quality of the shipped model on a held-out set simulated from a fixed seed, through the real
service path (each clip encoded as H.264 and rendered as `foley generate` renders it).

    python -m bench.eval [--clips 48] [--tier preview] [--kind drop]

The set: scenes with cameras, shapes and sizes never trained on (engines.sim.scene's holdout
rules), at 24, 25, 30 and 60 fps, with several objects, moving cameras and still spans as the
scene sampler makes them; every sixth clip is a scene where nothing sounds (alternately a static
scene, possibly filmed by a moving camera, and an object in free flight).

Prints every quality target of the reference model with what was measured:
- onsets: F1, precision, recall (+-50 ms), median timing error, share within +-10 ms;
- spurious onsets per minute where nothing happens (engines.eval.quality.spurious_onsets);
- rank correlation of impact impulse with generated level, and of rolling/sliding speed with
  the generated level over those spans;
- log-mel and multi-resolution STFT distance to the ground-truth track, against silence and
  against a fixed click at each onset detected in the generated track.
- the material: a small classifier (engines.eval.material) learns the object material from the
  ground-truth sound of isolated impacts in --material-clips drop scenes of the held-out
  distribution (other seeds),
  then names the material of the generated sound at the held-out set's isolated impacts; its
  accuracy on the same impacts' ground-truth sound is printed beside (the classifier's ceiling).
Not measured here: real camera footage.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import numpy as np

from bench.machine import describe
from engines.eval.material import (
    MaterialClassifier,
    event_features,
    isolated_impacts,
    training_set,
)
from engines.eval.onsets import OnsetScore, combined, detect_onsets, match_onsets, matched_pairs
from engines.eval.quality import (
    LevelPairs,
    SpectralDistance,
    click_track,
    impulse_levels,
    moving_intervals,
    spectral_distance,
    speed_levels,
    spurious_onsets,
)
from engines.eval.reference import contact_starts, reference_onsets
from engines.eval.sync import FPS_CHOICES, RenderedClip, render_clip
from engines.models.config import ModelConfig
from engines.sim import SCENE_KINDS
from engines.train.data import log_mel
from service.config import Settings
from service.pipeline.engine import FoleyEngine

log = logging.getLogger(__name__)
SEED = 3_000_000  # the held-out set: fixed, far from training and from engines.eval.sync's seeds
MATERIAL_SEED = 4_000_000  # the material classifier's ground-truth training scenes
SILENT_KINDS = ("static", "freefall")
CLEARLY = 0.9  # "beats a baseline clearly": at least 10 % closer to the truth
MIN_CLIP_BINS = 10  # 50 ms bins of rolling or sliding a clip needs for its own correlation


class Tally:
    def __init__(self, classifier: MaterialClassifier | None) -> None:
        self.classifier, self.mel = classifier, log_mel(ModelConfig())
        self.material_truth: list[np.ndarray] = []  # per clip: labels of isolated impacts
        self.material_on_truth: list[np.ndarray] = []  # predicted from the ground-truth sound
        self.material_on_model: list[np.ndarray] = []  # predicted from the generated sound
        self.material_missed = 0  # isolated impacts the generated track has no onset for
        self.scores: list[OnsetScore] = []
        self.impulse = LevelPairs(np.zeros(0), np.zeros(0))
        self.speed = LevelPairs(np.zeros(0), np.zeros(0))
        # Within one clip the picture's scale is one: whether the level rises and falls with the
        # speed there, apart from how loud one scene is against another (loudness-normalised).
        self.speed_per_clip: list[float] = []
        self.spurious, self.quiet_s = 0, 0.0
        # Spectral distances are taken once over all clips end to end: per clip, a silent truth
        # would make the spectral convergence term divide by nothing.
        self.tracks: dict[str, list[np.ndarray]] = {"truth": [], "model": [], "click": []}

    def add(self, r: RenderedClip) -> None:
        clip, rate = r.clip, r.sample_rate
        detected = detect_onsets(r.generated, rate)
        reference = reference_onsets(clip, r.truth, 48000)
        self.scores.append(match_onsets(detected, reference))
        impacts_s = np.asarray([i.time_s for i in clip.impacts])
        impulses = np.asarray([i.impulse_ns for i in clip.impacts])
        self.impulse += impulse_levels(r.generated, rate, detected, impacts_s, impulses)
        contacts = contact_starts(clip)
        sounding = []
        clip_speed = LevelPairs(np.zeros(0), np.zeros(0))
        for track in clip.tracks:
            speed = np.maximum(track.slide_speed, track.roll_speed)
            clip_speed += speed_levels(r.generated, rate, track.time_s, speed, contacts)
            sounding.append(moving_intervals(track.time_s, speed))
        self.speed += clip_speed
        if len(clip_speed.truth) >= MIN_CLIP_BINS and np.isfinite(clip_speed.rho):
            self.speed_per_clip.append(clip_speed.rho)
        intervals = np.concatenate(sounding) if sounding else np.zeros((0, 2))
        count, quiet = spurious_onsets(detected, contacts, intervals, clip.duration_s)
        self.spurious += count
        self.quiet_s += quiet
        self._materials(r, detected)
        n = len(r.truth)
        generated = np.zeros(n, np.float32)
        generated[: min(n, len(r.generated))] = r.generated[:n]
        self.tracks["truth"].append(r.truth)
        self.tracks["model"].append(generated)
        self.tracks["click"].append(click_track(detected, n, rate))

    def _materials(self, r: RenderedClip, detected: np.ndarray) -> None:
        events = isolated_impacts(r.clip)
        if not events or self.classifier is None:
            return
        times = np.asarray([t for t, _ in events])
        labels = np.asarray([m for _, m in events])
        pairs = matched_pairs(detected, times)
        rate = r.sample_rate
        self.material_missed += len(events) - len(pairs)
        if not pairs:
            return
        found = np.asarray([detected[i] for i, _ in pairs])
        which = np.asarray([j for _, j in pairs])
        self.material_truth.append(labels[which])
        self.material_on_truth.append(
            self.classifier.predict(event_features(r.truth, times[which], self.mel, rate))
        )
        self.material_on_model.append(
            self.classifier.predict(event_features(r.generated, found, self.mel, rate))
        )

    def material_accuracy(self) -> tuple[float, float, int]:
        """(accuracy on the generated sound, on the ground truth's, events judged)."""
        if not self.material_truth:
            return float("nan"), float("nan"), 0
        truth = np.concatenate(self.material_truth)
        model = np.concatenate(self.material_on_model)
        reference = np.concatenate(self.material_on_truth)
        return float(np.mean(model == truth)), float(np.mean(reference == truth)), len(truth)

    def distances(self) -> dict[str, SpectralDistance]:
        mel = log_mel(ModelConfig())
        truth = np.concatenate(self.tracks["truth"])
        return {
            "model": spectral_distance(np.concatenate(self.tracks["model"]), truth, mel),
            "silence": spectral_distance(np.zeros_like(truth), truth, mel),
            "click": spectral_distance(np.concatenate(self.tracks["click"]), truth, mel),
        }


def run(
    engine: FoleyEngine,
    clips: int,
    duration_s: float,
    material_clips: int,
    kind: str | None = None,
) -> Tally:
    classifier = None
    if material_clips:
        # The evaluated events' shapes and sizes (a material's modes move with size), other seeds.
        x, y = training_set(material_clips, MATERIAL_SEED, log_mel(ModelConfig()), holdout=True)
        log.info("material classifier: %d true impacts from %d clips", len(y), material_clips)
        classifier = MaterialClassifier.fit(x, y)
    tally = Tally(classifier)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(clips):
            seed, fps = SEED + i, FPS_CHOICES[i % len(FPS_CHOICES)]
            scene = kind
            if kind is None and i % 6 == 5:  # every sixth: nothing should sound
                scene = SILENT_KINDS[(i // 6) % 2]
            r = render_clip(engine, seed, fps, Path(tmp), duration_s=duration_s, kind=scene)
            tally.add(r)
            log.info("%d/%d seed %d %s %d fps", i + 1, clips, seed, r.clip.spec.kind, fps)
    return tally


def table(t: Tally) -> str:
    s = combined(t.scores)
    errors_ms = np.abs(s.errors_s) * 1000
    median = float(np.median(errors_ms)) if len(errors_ms) else float("nan")
    within = float(np.mean(errors_ms <= 10) * 100) if len(errors_ms) else float("nan")
    per_minute = t.spurious / max(t.quiet_s, 1e-9) * 60
    dist = {k: (d.log_mel, d.stft) for k, d in t.distances().items()}
    material, material_truth, judged = t.material_accuracy()
    per_clip = float(np.median(t.speed_per_clip)) if t.speed_per_clip else float("nan")

    def row(name: str, target: str, value: str, met: bool | None) -> str:
        verdict = "-" if met is None else ("yes" if met else "no")
        return f"| {name} | {target} | {value} | {verdict} |"

    lines = [
        "| measure | target | measured | met |",
        "|---|---|---|---|",
        row(
            "onset F1 (+-50 ms)",
            ">= 0.9",
            f"{s.f1:.3f} (P {s.precision:.3f}, R {s.recall:.3f}, "
            f"{s.true_positives + s.false_negatives} reference onsets)",
            s.f1 >= 0.9,
        ),
        row("median timing error", "<= 5 ms", f"{median:.1f} ms", median <= 5),
        row("matched onsets within +-10 ms", ">= 95 %", f"{within:.0f} %", within >= 95),
        row(
            "spurious onsets where nothing happens",
            "<= 0.5 / min",
            f"{per_minute:.2f} / min ({t.spurious} in {t.quiet_s / 60:.1f} min)",
            per_minute <= 0.5,
        ),
        row(
            "impulse vs generated level, Spearman",
            ">= 0.8",
            f"{t.impulse.rho:.3f} ({len(t.impulse.truth)} impacts)",
            t.impulse.rho >= 0.8,
        ),
        row(
            "material of generated events, classifier accuracy",
            ">= 80 %",
            f"{material:.0%} of {judged} isolated impacts (the same events' true sound: "
            f"{material_truth:.0%}; {t.material_missed} without an onset)",
            material >= 0.8,
        ),
        row(
            "rolling/sliding speed vs level, Spearman: pooled; median of clips",
            ">= 0.8",
            f"{t.speed.rho:.3f} ({len(t.speed.truth)} 50 ms bins); {per_clip:.3f} "
            f"({len(t.speed_per_clip)} clips)",
            t.speed.rho >= 0.8,
        ),
        row(
            "log-mel distance: model / silence / click",
            "model < 0.9 x the better baseline",
            " / ".join(f"{dist[k][0]:.3f}" for k in ("model", "silence", "click")),
            dist["model"][0] < CLEARLY * min(dist["silence"][0], dist["click"][0]),
        ),
        row(
            "MR-STFT distance: model / silence / click",
            "model < 0.9 x the better baseline",
            " / ".join(f"{dist[k][1]:.3f}" for k in ("model", "silence", "click")),
            dist["model"][1] < CLEARLY * min(dist["silence"][1], dist["click"][1]),
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=48)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--tier", default=None, help="model tier (default: the configured one)")
    parser.add_argument(
        "--material-clips",
        type=int,
        default=1000,
        help="drop scenes (sound only) the material classifier learns from",
    )
    parser.add_argument(
        "--kind",
        choices=SCENE_KINDS,
        default=None,
        help="every clip of this scene kind (drop: the most isolated impacts, for the material)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    engine = FoleyEngine.load(Settings(), args.tier)
    tally = run(engine, args.clips, args.duration, args.material_clips, args.kind)
    print(describe())
    print(
        f"tier {engine.tier.name} {engine.tier.version}; {args.clips} held-out clips of "
        f"{args.duration:g} s from seed {SEED}{'' if args.kind is None else ', ' + args.kind}\n"
    )
    print(table(tally))


if __name__ == "__main__":
    main()
