"""Choose each stage's float precision for the cuda backend by what it does to the rendered track:

    python -m engines.eval.precision [--tiers preview export objects] [--clips 4] [--write]

Each tier renders the bundled sample, `--clips` fresh simulated scenes and a flat graphic clip
(engines.eval.calibrate) on the cpu backend (fp32, the reference) and on the cuda backend with
one stage at a time in fp16 or bf16. A precision is kept for a stage when, over every clip, the
track's log-mel distance to the reference (engines.eval.quality, natural-log power) stays under
MAX_LOG_MEL and its onsets (engines.eval.onsets, the sync instrument) match the reference's with
F1 >= MIN_ONSET_F1 within ONSET_TOLERANCE_S: fp16 first (more mantissa), then bf16, else fp32.
The choices are then checked together, and stages go back to fp32 until they pass.

On a machine without a GPU the cuda backend runs on torch's CPU device, which rounds weights and
activations to the same formats; bench/gpu.py re-checks the choice on the GPU. `--write` stores
it in each tier's config.json (`gpu.precision`).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from engines.eval import calibrate
from engines.eval.onsets import detect_onsets, match_onsets
from engines.eval.quality import spectral_distance
from engines.eval.sync import read_audio
from engines.models.mel import LogMel
from service.config import Settings
from service.pipeline.backends.base import backend_present
from service.pipeline.backends.cuda import CudaBackend
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

log = logging.getLogger(__name__)
MAX_LOG_MEL = 0.05
MIN_ONSET_F1 = 0.98
ONSET_TOLERANCE_S = 0.002
CANDIDATES = ("fp16", "bf16")


def render(engine: FoleyEngine, video: Path, out: Path) -> np.ndarray:
    engine.render(video, out, RenderOptions(format="wav", loudness=None))
    return read_audio(out)[0]


def compare(audio: np.ndarray, reference: np.ndarray, mel: LogMel) -> tuple[float, float]:
    """-> (log-mel distance, onset F1) of a track against the reference track."""
    distance = spectral_distance(audio, reference, mel).log_mel
    onsets = match_onsets(
        detect_onsets(audio, 48000), detect_onsets(reference, 48000), ONSET_TOLERANCE_S
    )
    return distance, onsets.f1


class Reference:
    """A tier's fp32 tracks of the clips, rendered once on the cpu backend, and the worst score
    of the cuda backend's tracks against them at given precisions."""

    def __init__(self, models: Path, tier: str, clips: list[tuple[str, Path]], workdir: Path):
        self.settings = Settings(models_dir=models, window_memo=False)
        engine = FoleyEngine.load(self.settings, tier)
        self.tier, self.clips, self.workdir = engine.tier, clips, workdir
        self.tracks = {name: render(engine, video, workdir / "ref.wav") for name, video in clips}
        self.device = "cuda" if backend_present("cuda") else "cpu"
        self.mel = LogMel(sample_rate=48000, hop=400, n_fft=1600, n_mels=64, fmin=0.0,
                          fmax=24000.0, log_floor=1e-5)  # fmt: skip

    def worst(self, precision: dict[str, str]) -> tuple[float, float]:
        """-> (the largest log-mel distance, the lowest onset F1) over the clips."""
        backend = CudaBackend(self.tier, device=self.device, precision=precision)
        engine = FoleyEngine(self.settings, self.tier, backend)
        scores = [
            compare(render(engine, video, self.workdir / "out.wav"), self.tracks[name], self.mel)
            for name, video in self.clips
        ]
        return max(d for d, _ in scores), min(f for _, f in scores)


def study(reference: Reference) -> dict:
    """Per stage and candidate precision, that stage alone: the worst score over the clips."""
    found: dict = {}
    for stage in (s.name for s in reference.tier.stages):
        for precision in CANDIDATES:
            found[stage, precision] = worst = reference.worst({stage: precision})
            log.info("%s %s %s: log-mel %.4f, onset F1 %.3f", reference.tier.name, stage,
                     precision, *worst)  # fmt: skip
    return found


def kept(score: tuple[float, float]) -> bool:
    return score[0] <= MAX_LOG_MEL and score[1] >= MIN_ONSET_F1


def choose(found: dict, stages: list[str]) -> dict[str, str]:
    """Each stage's precision alone: the first candidate kept, else fp32."""
    return {s: next((p for p in CANDIDATES if kept(found[s, p])), "fp32") for s in stages}


def together(reference: Reference, chosen: dict) -> tuple[dict[str, str], tuple[float, float]]:
    """The stages' choices at once, which one at a time does not promise: while they fail
    together, the last stage still in reduced precision goes back to fp32."""
    chosen = dict(chosen)
    while True:
        worst = reference.worst(chosen)
        reduced = [s for s, p in chosen.items() if p != "fp32"]
        if kept(worst) or not reduced:
            return chosen, worst
        chosen[reduced[-1]] = "fp32"
        log.info("%s: together they move the track (%.4f, F1 %.3f): %s back to fp32",
                 reference.tier.name, *worst, reduced[-1])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = calibrate.parser(__doc__, clips=4).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = args.models or Settings().models_dir
    device = "cuda" if backend_present("cuda") else "cpu (the formats' rounding, no GPU)"
    print(f"device: {device}; keep when log-mel <= {MAX_LOG_MEL} and onset F1 >= {MIN_ONSET_F1}")
    with tempfile.TemporaryDirectory() as tmp:
        clips = calibrate.typical_clips(Path(tmp), args.clips)
        clips.append(("graphic", calibrate.graphic_clip(Path(tmp) / "graphic.mp4")))
        for tier in args.tiers:
            reference = Reference(models, tier, clips, Path(tmp))
            found = study(reference)
            stages = list(dict.fromkeys(stage for stage, _ in found))
            chosen, worst = together(reference, choose(found, stages))
            print(f"\n{tier}\n| stage | fp16 log-mel / F1 | bf16 log-mel / F1 | chosen |")
            print("|---|---|---|---|")
            for stage in stages:
                cells = [f"{found[stage, p][0]:.4f} / {found[stage, p][1]:.3f}" for p in CANDIDATES]
                print(f"| {stage} | {' | '.join(cells)} | {chosen[stage]} |")
            print(f"together: log-mel {worst[0]:.4f}, onset F1 {worst[1]:.3f}")
            if args.write:

                def store(raw: dict, chosen: dict = chosen) -> None:
                    raw["gpu"] = {"precision": chosen}

                print(f"wrote {calibrate.write_config(models, tier, store)}")


if __name__ == "__main__":
    main()
