"""Real camera footage through the service path: what the model makes of pictures from outside
its simulator.

    python -m engines.eval.footage [VIDEO ...] [--tier preview] [--hold 2]

The default video is `engines/eval/footage/city_cc0.mp4` (see the README there): a night shot of
city towers, the camera gliding over them, one cut, and nothing in it that makes a contact sound.
Each video is rendered as `foley generate` renders it, with its first frame held still for
`--hold` seconds before it and its last frame held still as long after it: spans where nothing
moves, in real pixels with the real sensor noise frozen into them.

Per track it reports, and checks against BOUNDS:
- the peak (dBFS) and clipped samples (|x| >= CLIP_LEVEL): no clipping;
- the DC offset (mean sample value): none;
- the loudest LOUDNESS_WINDOW_S window (RMS, dBFS) over the whole track: bounded loudness;
- the level (RMS, dBFS) and the onsets detected in the still spans: no sound where nothing moves;
- onsets per minute over the whole track, reported (with no contact on screen, each is spurious;
  the held-out simulated bound lives in bench.eval).
"""

from __future__ import annotations

import argparse
import math
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np

from engines.eval.onsets import detect_onsets
from engines.eval.sync import read_audio

if TYPE_CHECKING:
    from service.pipeline.engine import FoleyEngine

DEFAULT_FOOTAGE = Path(__file__).resolve().parent / "footage" / "city_cc0.mp4"
CLIP_LEVEL = 0.999  # a sample at or past this magnitude counts as clipped
LOUDNESS_WINDOW_S = 0.4
STILL_GUARD_S = 0.5  # the end of a still span next to the moving picture is not counted


@dataclass(frozen=True)
class Bounds:
    peak_db: float = -1.0  # headroom below full scale
    dc: float = 1e-3  # |mean| (-60 dBFS)
    loudest_db: float = -6.0  # RMS of the loudest LOUDNESS_WINDOW_S
    still_db: float = -60.0  # RMS over the still spans
    still_onsets: int = 0


BOUNDS = Bounds()


@dataclass(frozen=True)
class FootageReport:
    name: str
    duration_s: float
    peak_db: float
    clipped: int
    dc: float
    loudest_db: float
    still_db: float
    still_onsets: int
    onsets_per_min: float

    def failures(self, bounds: Bounds = BOUNDS) -> list[str]:
        """What breaks a bound, in words (empty: it passes)."""
        checks = [
            (self.clipped == 0 and self.peak_db <= bounds.peak_db, "clipping or no headroom"),
            (abs(self.dc) <= bounds.dc, "DC offset"),
            (self.loudest_db <= bounds.loudest_db, "too loud"),
            (self.still_db <= bounds.still_db, "sound where nothing moves"),
            (self.still_onsets <= bounds.still_onsets, "onsets where nothing moves"),
        ]
        return [reason for ok, reason in checks if not ok]


def db(x: float) -> float:
    return 20 * math.log10(max(x, 1e-10))


def measure(
    name: str, audio: np.ndarray, rate: int, still: list[tuple[float, float]]
) -> FootageReport:
    """The report of one generated track; `still`: [start, end) seconds where nothing moves."""
    audio = audio.astype(np.float64)
    n = max(1, round(LOUDNESS_WINDOW_S * rate))
    hop = max(1, n // 4)
    windows = [audio[i : i + n] for i in range(0, max(1, len(audio) - n + 1), hop)]
    loudest = max(float(np.sqrt(np.mean(w**2))) if len(w) else 0.0 for w in windows)
    onsets = detect_onsets(audio.astype(np.float32), rate)
    spans = [(round(a * rate), round(b * rate)) for a, b in still if b > a]
    quiet = np.concatenate([audio[a:b] for a, b in spans]) if spans else np.zeros(1)
    in_still = sum(int(np.sum((onsets >= a / rate) & (onsets < b / rate))) for a, b in spans)
    duration = len(audio) / rate
    return FootageReport(
        name=name,
        duration_s=duration,
        peak_db=db(float(np.max(np.abs(audio), initial=0.0))),
        clipped=int(np.sum(np.abs(audio) >= CLIP_LEVEL)),
        dc=float(np.mean(audio)) if len(audio) else 0.0,
        loudest_db=db(loudest),
        still_db=db(float(np.sqrt(np.mean(quiet**2)))),
        still_onsets=in_still,
        onsets_per_min=60.0 * len(onsets) / duration if duration else 0.0,
    )


def with_still_ends(video: Path, out: Path, hold_s: float) -> tuple[float, float]:
    """`video` with its first frame held for `hold_s` before it and its last frame after it,
    re-encoded as H.264 at its own frame rate -> (seconds before the motion, seconds to the end
    of it). Holds every decoded frame in memory: meant for short clips."""
    with av.open(str(video)) as src:
        stream = src.streams.video[0]
        rate = stream.average_rate or Fraction(25)
        frames = [f.reformat(format="yuv420p") for f in src.decode(stream)]
    if not frames:
        raise ValueError(f"{video} has no video frames")
    held = round(hold_s * rate)
    sequence = [frames[0]] * held + frames + [frames[-1]] * held
    with av.open(str(out), "w") as dst:
        enc = dst.add_stream("libx264", rate=rate)
        enc.width, enc.height = frames[0].width // 2 * 2, frames[0].height // 2 * 2  # even sizes
        enc.pix_fmt, enc.options = "yuv420p", {"crf": "18"}
        for i, frame in enumerate(sequence):
            picture = frame.reformat(width=enc.width, height=enc.height)
            picture.pts, picture.time_base = i, Fraction(1) / rate
            dst.mux(enc.encode(picture))
        dst.mux(enc.encode())
    return float(held / rate), float((held + len(frames)) / rate)


def evaluate(videos: list[Path], tier: str, hold_s: float) -> list[FootageReport]:
    from service.config import Settings
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings(), tier)
    with tempfile.TemporaryDirectory() as tmp:
        return [render(engine, video, Path(tmp), hold_s) for video in videos]


def render(engine: FoleyEngine, video: Path, workdir: Path, hold_s: float) -> FootageReport:
    """`video` with still ends (`with_still_ends`), rendered as `foley generate` renders it."""
    from service.pipeline.types import RenderOptions

    held = workdir / f"{video.stem}_held.mp4"
    start, end = with_still_ends(video, held, hold_s)
    track = workdir / f"{video.stem}.wav"
    engine.render(held, track, RenderOptions(format="wav", loudness=None))
    audio, rate = read_audio(track)
    still = [(0.0, start - STILL_GUARD_S), (end + STILL_GUARD_S, len(audio) / rate)]
    return measure(video.name, audio, rate, still)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("videos", nargs="*", type=Path, default=[DEFAULT_FOOTAGE])
    parser.add_argument("--tier", default="preview")
    parser.add_argument("--hold", type=float, default=2.0, help="seconds of still frames each end")
    args = parser.parse_args()
    reports = evaluate(args.videos, args.tier, args.hold)
    print(
        f"| video | s | peak dBFS | clipped | DC | loudest {LOUDNESS_WINDOW_S * 1000:.0f} ms dBFS "
        "| still spans dBFS | onsets in still spans | onsets/min | bounds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        verdict = ", ".join(r.failures()) or "met"
        print(
            f"| {r.name} | {r.duration_s:.1f} | {r.peak_db:.1f} | {r.clipped} | {r.dc:.1e} "
            f"| {r.loudest_db:.1f} | {r.still_db:.1f} | {r.still_onsets} "
            f"| {r.onsets_per_min:.1f} | {verdict} |"
        )
    b = BOUNDS
    print(
        f"\nbounds: peak <= {b.peak_db:g} dBFS and no sample at |x| >= {CLIP_LEVEL}; "
        f"|DC| <= {b.dc:g}; loudest {LOUDNESS_WINDOW_S:g} s <= {b.loudest_db:g} dBFS; "
        f"still spans <= {b.still_db:g} dBFS with {b.still_onsets} onsets"
    )
    if any(r.failures() for r in reports):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
