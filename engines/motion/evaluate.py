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

from engines.motion.features import HEIGHT, WIDTH
from engines.motion.model import ContactHead
from service.media.frames import FrameScaler, rgb_as_decoded
from service.pipeline.motion.detector import HeadFn, MotionDetector

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
    for t, rgb in zip(times_s, frames, strict=True):
        detector.push(float(t), rgb_as_decoded(rgb, scaler))
    detector.finish()
    return np.array([e.time_s for e in detector.events])


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


class Recorder:
    """A head that remembers what it answered, so that thresholds can be swept afterwards
    without running it again (the picker only reads the maps)."""

    def __init__(self, head: HeadFn) -> None:
        self.head, self.maps = head, []

    def __call__(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out = self.head(x)
        self.maps += [{k: v[i] for k, v in out.items()} for i in range(len(x))]
        return out


def real_maps(head: HeadFn, clips) -> list[tuple[list[dict], list[tuple[float, float]]]]:
    """Per real clip: the head's maps of every interval decided, and the intervals' spans."""
    from service.pipeline.motion.detector import MotionDetector

    found = []
    for clip in clips:
        times, frames = decode_picture(clip.path)
        recorder = Recorder(head)
        detector = MotionDetector(WIDTH, HEIGHT, recorder, threshold=2.0)  # fires nothing
        spans = []
        original = detector.picker.decide

        def spy(maps, start_s, end_s, _spans=spans, _decide=original):
            _spans.append((start_s, end_s))
            return _decide(maps, start_s, end_s)

        detector.picker.decide = spy
        for t, rgb in zip(times, frames, strict=True):
            detector.push(float(t), rgb)
        detector.finish()
        found.append((recorder.maps, spans))
    return found


def replay(maps, spans, threshold: float) -> np.ndarray:
    from service.pipeline.motion.events import EventPicker, HeadMaps

    picker, fired = EventPicker(threshold), []
    for m, (a, b) in zip(maps, spans, strict=True):
        fired += [p.time_s for p in picker.decide(HeadMaps(**m), a, b)]
    return np.array(fired)


def score_real(head: HeadFn, thresholds: list[float], offset_s: float = 0.0) -> None:
    from engines.eval.real import summary_table
    from engines.eval.realclips import Detection, load_clips, score_detections

    clips = load_clips()
    recorded = real_maps(head, clips)
    reports = []
    for thr in thresholds:
        detections = [Detection(replay(maps, spans, thr) + offset_s) for maps, spans in recorded]
        reports.append(score_detections(clips, detections, "fired", label=f"motion@{thr:g}"))
    print(summary_table(reports))


def match(fired: np.ndarray, required: np.ndarray, other: np.ndarray) -> tuple[int, int, list]:
    """(true positives, false positives, signed errors): one to one, closest first; a fired
    event within TOLERANCE_S of a contact that is not required is left out."""
    pairs = sorted(
        (abs(f - r), i, j)
        for i, f in enumerate(fired)
        for j, r in enumerate(required)
        if abs(f - r) <= TOLERANCE_S
    )
    used_f, used_r, errors = set(), set(), []
    for _, i, j in pairs:
        if i not in used_f and j not in used_r:
            used_f.add(i), used_r.add(j)
            errors.append(float(fired[i] - required[j]))
    fp = sum(
        1
        for i, f in enumerate(fired)
        if i not in used_f and not np.any(np.abs(other - f) <= TOLERANCE_S)
    )
    return len(used_f), fp, errors


def feature_events(clip, head: HeadFn, threshold: float, batch: int = 64) -> np.ndarray:
    """Event times of a cached clip (engines.motion.features), its windows as the detector
    builds them, per shot."""
    from engines.motion.train import Sampler
    from service.pipeline.motion.events import EventPicker, HeadMaps

    sampler = Sampler([clip], np.random.default_rng(0))
    ks = np.flatnonzero(clip.valid)
    maps = []
    for i in range(0, len(ks), batch):
        x = np.stack([sampler.window(clip, int(k)) for k in ks[i : i + batch]])
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
        tp = fp = fn = 0
        errors: list[float] = []
        for clip in clips:
            fired = feature_events(clip, head, thr)
            c = clip.contacts
            k = c[:, COL["interval"]].astype(int)
            times = clip.start_s[k] + c[:, COL["u"]] * (clip.end_s[k] - clip.start_s[k])
            req = c[:, COL["required"]] > 0
            a, b, e = match(fired, times[req], times[~req])
            tp, fp, fn = tp + a, fp + b, fn + int(req.sum()) - a
            errors += e
        e = 1000 * np.abs(errors)
        med = np.median(e) if len(e) else np.nan
        within = np.mean(e <= 10) if len(e) else np.nan
        print(f"{thr:9.2f} {tp:5d} {fp:5d} {fn:5d} {f1(tp, fp, fn):6.3f} {med:7.1f} {within:7.0%}")


def score_sprites(seeds: range, head: HeadFn, threshold: float) -> dict:
    from engines.sim.sprites import sample_clip

    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    errors: list[float] = []
    for seed in seeds:
        clip = sample_clip(seed)
        fired = detect_frames(clip.frames, clip.times_s, head, threshold)
        req = np.array([c.time_s for c in clip.contacts if c.required])
        other = np.array([c.time_s for c in clip.contacts if not c.required])
        tp, fp, err = match(fired, req, other)
        for key in (clip.kind, "all"):
            r = rows[key]
            r[0] += tp
            r[1] += fp
            r[2] += len(req) - tp
        errors += err
    return {"rows": dict(rows), "errors_ms": 1000 * np.array(errors)}


def f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / max(1, 2 * tp + fp + fn)


def print_sprites(report: dict) -> None:
    print(f"{'kind':10s} {'tp':>5s} {'fp':>5s} {'fn':>5s} {'F1':>6s}")
    for kind, (tp, fp, fn) in sorted(report["rows"].items()):
        print(f"{kind:10s} {tp:5d} {fp:5d} {fn:5d} {f1(tp, fp, fn):6.3f}")
    e = np.abs(report["errors_ms"])
    if len(e):
        print(
            f"timing: median {np.median(e):.1f} ms, within 10 ms {np.mean(e <= 10):.0%}, "
            f"signed median {np.median(report['errors_ms']):+.1f} ms"
        )


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
