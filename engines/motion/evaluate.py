"""The contact head measured as it will serve: frames through service.pipeline.motion's
detector, events matched to the contacts a viewer should hear.

    python -m engines.motion.evaluate --checkpoint runs/motion/head.pt --seeds 900000:900100
    python -m engines.motion.evaluate --checkpoint runs/motion/head.pt --real

Generated clips (engines.sim.sprites, seeds never trained on): fired-event F1 within +-50 ms of
the required contacts (a fired event near a contact that is not required is neither right nor
wrong), the timing error of matches, per scenario kind. `--real`: engines.eval.real on the real
clips, fired events, with the chance row.
"""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from engines.eval.onsets import OnsetScore, Reference, combined, score_onsets
from engines.motion.features import HEIGHT, WIDTH, clip_window
from engines.motion.model import ContactHead
from service.media.frames import FrameScaler, rgb_as_decoded
from service.pipeline.motion.detector import HeadFn, MotionDetector
from service.pipeline.motion.events import EventPicker, HeadMaps

log = logging.getLogger(__name__)
TOLERANCE_S = 0.05


def load_model(path: Path) -> ContactHead:
    state = torch.load(path, map_location="cpu")
    model = ContactHead(**state["config"])
    model.load_state_dict(state["model"])
    return model.eval()


def torch_head(model: ContactHead) -> HeadFn:
    def run(x: np.ndarray) -> dict[str, np.ndarray]:
        with torch.no_grad():
            out = model(torch.from_numpy(x))
        return {
            "probability": torch.sigmoid(out["logit"][:, 0]).numpy(),
            "u": out["u"][:, 0].numpy(),
            "strength": out["strength"][:, 0].numpy(),
            "material": torch.softmax(out["material"], dim=1).numpy(),
        }

    return run


def detect_frames(
    frames: np.ndarray, times_s: np.ndarray, head: HeadFn, threshold: float
) -> np.ndarray:
    """Event times of frames (N, H, W, 3) uint8 at times_s, as the service would decode them."""
    scaler = FrameScaler(WIDTH, HEIGHT, letterbox=True)
    detector = MotionDetector(WIDTH, HEIGHT, head, threshold)
    found = []
    for t, rgb in zip(times_s, frames, strict=True):
        found += detector.push(float(t), rgb_as_decoded(rgb, scaler))
    found += detector.finish()
    return np.array([e.time_s for e in found])


def decode_picture(path: Path) -> tuple[np.ndarray, list[np.ndarray]]:
    """A video's frames letterboxed into the picture, times from its first frame, as the
    service decodes them."""
    from service.config import Settings
    from service.media.decode import DecodeLimits, open_video

    times, frames = [], []
    limits = DecodeLimits.from_settings(Settings())
    with open_video(path, width=WIDTH, height=HEIGHT, limits=limits, letterbox=True) as stream:
        for batch in stream:
            times.extend(batch.pts_s.tolist())
            frames.extend(batch.rgb)
    t = np.asarray(times)
    return t - t[0], frames


class Recorder(EventPicker):
    """A picker that keeps every interval's maps and span and fires nothing, so that
    thresholds can be swept afterwards without running the head again (`replay`)."""

    def __init__(self) -> None:
        super().__init__(threshold=np.inf)
        self.maps: list[HeadMaps] = []
        self.spans: list[tuple[float, float]] = []

    def decide(self, maps: HeadMaps, start_s: float, end_s: float) -> list:
        self.maps.append(maps)
        self.spans.append((start_s, end_s))
        return []


def real_maps(head: HeadFn, clips) -> list[Recorder]:
    """Per real clip: the head's maps of every interval decided, and the intervals' spans."""
    found = []
    for clip in clips:
        times, frames = decode_picture(clip.path)
        detector = MotionDetector(WIDTH, HEIGHT, head, threshold=np.inf)
        detector.picker = recorder = Recorder()
        for t, rgb in zip(times, frames, strict=True):
            detector.push(float(t), rgb)
        detector.finish()
        found.append(recorder)
    return found


def replay(recorded: Recorder, threshold: float) -> np.ndarray:
    """The events a picker at `threshold` fires on what `recorded` kept."""
    picker, fired = EventPicker(threshold), []
    for maps, (a, b) in zip(recorded.maps, recorded.spans, strict=True):
        fired += [p.time_s for p in picker.decide(maps, a, b)]
    return np.array(fired)


def score_real(head: HeadFn, thresholds: list[float], offset_s: float = 0.0) -> None:
    from engines.eval.real import summary_table
    from engines.eval.realclips import Detection, load_clips, score_detections

    clips = load_clips()
    recorded = real_maps(head, clips)
    reports = []
    for thr in thresholds:
        detections = [Detection(replay(r, thr) + offset_s) for r in recorded]
        reports.append(score_detections(clips, detections, "fired", label=f"motion@{thr:g}"))
    print(summary_table(reports))
    print(separation(clips, recorded))


def separation(clips, recorded: list[Recorder]) -> str:
    """Whether the head tells contacts from other motion on real clips: the median of its
    highest probability per interval, in intervals holding a reference onset (+-20 ms) of the
    scored positives, in their other intervals, and on the negatives."""
    groups: dict[str, list[float]] = {"contact": [], "other": [], "negatives": []}
    for clip, r in zip(clips, recorded, strict=True):
        for maps, (a, b) in zip(r.maps, r.spans, strict=True):
            top = float(maps.probability.max())
            if clip.kind == "negative":
                groups["negatives"].append(top)
            elif clip.scored:
                hit = any(a - 0.02 <= t < b + 0.02 for t in clip.audio_onsets_s)
                groups["contact" if hit else "other"].append(top)
    medians = ", ".join(f"{k} {np.median(v):.2f} ({len(v)})" for k, v in groups.items() if v)
    return f"highest probability per interval, median (intervals): {medians}"


def feature_events(clip, head: HeadFn, threshold: float, batch: int = 64) -> np.ndarray:
    """Event times of a cached clip (engines.motion.features), its windows as the detector
    builds them, per shot."""
    ks = np.flatnonzero(clip.valid)
    maps = []
    for i in range(0, len(ks), batch):
        x = np.stack([clip_window(clip, int(k)) for k in ks[i : i + batch]])
        out = head(x)
        maps += [{k: v[j] for k, v in out.items()} for j in range(len(x))]
    picker, fired, shot = EventPicker(threshold), [], None
    for k, m in zip(ks, maps, strict=True):
        if clip.shot[k] != shot:
            picker.reset()
            shot = clip.shot[k]
        fired += [p.time_s for p in picker.decide(HeadMaps(**m), clip.start_s[k], clip.end_s[k])]
    return np.array(fired)


def score_features(clips, head: HeadFn, thresholds: list[float]) -> None:
    """Fired-event F1 on cached clips at each threshold, with the timing of matches."""
    from engines.motion.targets import COL

    names = ("threshold", "tp", "fp", "fn", "F1", "med ms", "<=10ms")
    print(" ".join(f"{n:>{w}s}" for n, w in zip(names, (9, 5, 5, 5, 6, 7, 7), strict=True)))
    for thr in thresholds:
        scores = []
        for clip in clips:
            c = clip.contacts
            k = c[:, COL["interval"]].astype(int)
            times = clip.start_s[k] + c[:, COL["u"]] * (clip.end_s[k] - clip.start_s[k])
            req = c[:, COL["required"]] > 0
            reference = Reference(times[req], times[~req])
            scores.append(score_onsets(feature_events(clip, head, thr), reference, TOLERANCE_S))
        print(f"{thr:9.2f} {score_line(combined(scores))}")


def score_sprites(seeds: range, head: HeadFn, threshold: float) -> dict:
    from engines.sim.sprites import sample_clip

    rows: dict[str, list[OnsetScore]] = defaultdict(list)
    for seed in seeds:
        clip = sample_clip(seed)
        fired = detect_frames(clip.frames, clip.times_s, head, threshold)
        required = np.array([c.time_s for c in clip.contacts if c.required])
        other = np.array([c.time_s for c in clip.contacts if not c.required])
        score = score_onsets(fired, Reference(required, other), TOLERANCE_S)
        rows[clip.kind].append(score)
        rows["all"].append(score)
    return {kind: combined(scores) for kind, scores in rows.items()}


def score_line(score: OnsetScore) -> str:
    """tp, fp, fn, F1, the median timing error and the share within 10 ms."""
    e = 1000 * np.abs(score.errors_s)
    med = np.median(e) if len(e) else np.nan
    within = np.mean(e <= 10) if len(e) else np.nan
    return (
        f"{score.true_positives:5d} {score.false_positives:5d} {score.false_negatives:5d} "
        f"{score.f1:6.3f} {med:7.1f} {within:7.0%}"
    )


def print_sprites(report: dict[str, OnsetScore]) -> None:
    names = ("kind", "tp", "fp", "fn", "F1", "med ms", "<=10ms")
    print(" ".join(f"{n:>{w}s}" for n, w in zip(names, (9, 5, 5, 5, 6, 7, 7), strict=True)))
    for kind, score in sorted(report.items()):
        print(f"{kind:>9s} {score_line(score)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/motion/head.pt"))
    parser.add_argument("--seeds", default="900000:900060")
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--features", type=Path, help="cached clips (engines.motion.data)")
    parser.add_argument("--thresholds", default="0.2,0.3,0.4,0.5,0.6,0.7")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    head = torch_head(load_model(args.checkpoint))
    thresholds = [float(t) for t in args.thresholds.split(",")]
    if args.real:
        score_real(head, thresholds)
        return
    if args.features:
        from engines.motion.data import load_dir

        score_features(load_dir(args.features), head, thresholds)
        return
    a, b = map(int, args.seeds.split(":"))
    print_sprites(score_sprites(range(a, b), head, args.threshold))


if __name__ == "__main__":
    main()
