"""Encoded demo and benchmark videos of simulated scenes, with their ground truth.

    write_video_clip(path, seed=7, duration_s=6, fps=30, width=640, height=360) -> SimClip

Renders at the full requested size and encodes with PyAV; frame k gets pts k in time base 1/fps,
so its presentation time is exactly k / fps (29.97 is the fraction 30000/1001). The file holds
one video stream and nothing else; the returned `SimClip` is the ground truth (impacts, tracks),
and `engines.audio.synthesize(clip)` its reference soundtrack. The scene of a seed is the same
as `engines.data.dataset.make_clip(seed)`'s.

CLI: python -m engines.data.clips out.mp4 --seed 7 --duration 6 --fps 30 --size 640x360
"""

from __future__ import annotations

import argparse
import json
import logging
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from engines.sim import SimClip, scene_from_seed, simulate
from engines.sim.simulate import as_fraction

log = logging.getLogger(__name__)

VFR_TIME_BASE = Fraction(1, 90000)  # MPEG's clock: where variable-rate frames are stamped

# Encoder -> pixel format; ProRes has no 4:2:0 profile.
PIXEL_FORMATS: dict[str, str] = {"prores_ks": "yuv422p10le"}
ENCODER_OPTIONS: dict[str, dict[str, str]] = {
    "libx264": {"crf": "18", "preset": "veryfast"},
    "libsvtav1": {"crf": "30", "preset": "10"},
}
# Conventional NTSC rates written as decimals on command lines.
NTSC: dict[str, Fraction] = {
    "23.976": Fraction(24000, 1001),
    "29.97": Fraction(30000, 1001),
    "59.94": Fraction(60000, 1001),
}


def write_video_clip(
    path: str | Path,
    *,
    seed: int,
    duration_s: float,
    fps: float | Fraction,
    width: int,
    height: int,
    codec: str = "libx264",
    holdout: bool = False,
    kind: str | None = None,
    variable: bool = False,
) -> SimClip:
    """Simulate the scene of `seed`, render it at width x height and encode it to `path`
    (container from the extension). Returns the clip's ground truth, frames included (all
    frames are held in memory: ~0.5 GB for 6 s of 1280x720 at 30 fps). NTSC rates must be
    passed as fractions (`Fraction(30000, 1001)`); a float fps is snapped to a decimal fraction.
    `variable`: a variable frame rate around `fps` (`variable_frame_times`), as phones record."""
    if width % 2 or height % 2:
        raise ValueError(f"width and height must be even for 4:2:0 video, got {width}x{height}")
    if codec not in av.codecs_available:
        raise ValueError(f"encoder {codec!r} is not available in this PyAV build")
    rate = as_fraction(fps)
    times = variable_frame_times(duration_s, rate, seed) if variable else None
    clip = simulate(
        scene_from_seed(seed, kind=kind, holdout=holdout),
        duration_s=duration_s,
        fps=rate,
        width=width,
        height=height,
        frame_times=times,
    )
    encode_frames(path, clip.frames, rate, codec=codec, times=times)
    log.info(
        "wrote %s: %d frames at %s fps, %d impacts", path, len(clip.frames), rate, len(clip.impacts)
    )
    return clip


def encode_frames(
    path: str | Path,
    frames: np.ndarray,
    fps: Fraction,
    *,
    codec: str = "libx264",
    times: list[Fraction] | None = None,
) -> None:
    """Encode RGB `frames` (N, H, W, 3) to `path`: frame k at k / fps, or at `times[k]` (which
    must lie on the VFR_TIME_BASE grid)."""
    height, width = frames.shape[1:3]
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=fps, options=ENCODER_OPTIONS.get(codec, {}))
        stream.width, stream.height = width, height
        stream.pix_fmt = PIXEL_FORMATS.get(codec, "yuv420p")
        # The muxer may replace the stream's time base when it writes the header (mp4: 1/30000
        # for 29.97), so frames keep their own: pts k in units of 1/fps.
        time_base = 1 / fps if times is None else VFR_TIME_BASE
        stream.time_base = stream.codec_context.time_base = time_base
        for k, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            pts = Fraction(k) if times is None else times[k] / VFR_TIME_BASE
            if pts.denominator != 1:
                raise ValueError(f"frame time {times[k]} is not on the {VFR_TIME_BASE} grid")
            frame.pts, frame.time_base = int(pts), time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))  # flush the encoder's delayed frames


def variable_frame_times(duration_s: float, fps: Fraction, seed: int) -> list[Fraction]:
    """Frame times of a variable-rate recording around `fps`: each interval drawn between 0.6
    and 1.6 nominal intervals, on the VFR_TIME_BASE grid, from 0 to before `duration_s`."""
    rng = np.random.default_rng([seed, 17])
    nominal = 1 / fps
    times, t = [], Fraction(0)
    while t < as_fraction(duration_s):
        times.append(t)
        step = nominal * Fraction(float(rng.uniform(0.6, 1.6))).limit_denominator(1000)
        t += max(VFR_TIME_BASE, round(step / VFR_TIME_BASE) * VFR_TIME_BASE)
    return times


def _parse_fps(text: str) -> Fraction:
    if text in NTSC:
        return NTSC[text]
    value = Fraction(text)  # "30", "30000/1001", "12.5"
    if value <= 0:
        raise argparse.ArgumentTypeError(f"fps must be positive, got {text}")
    return value


def _parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 640x360, got {text!r}") from None
    return w, h


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds")
    parser.add_argument(
        "--fps",
        type=_parse_fps,
        default=Fraction(30),
        help="30, 25, 29.97 (= 30000/1001) or a fraction",
    )
    parser.add_argument("--size", type=_parse_size, default=(640, 360), help="WxH")
    parser.add_argument("--codec", default="libx264")
    parser.add_argument("--kind", default=None, help="scenario kind (default: random)")
    parser.add_argument("--holdout", action="store_true", help="evaluation-only scene")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    width, height = args.size
    try:
        clip = write_video_clip(
            args.out,
            seed=args.seed,
            duration_s=args.duration,
            fps=args.fps,
            width=width,
            height=height,
            codec=args.codec,
            holdout=args.holdout,
            kind=args.kind,
        )
    except ValueError as e:
        parser.error(str(e))
    summary = {
        "video": str(args.out),
        "kind": clip.spec.kind,
        "frames": len(clip.frames),
        "fps": str(clip.fps),
        "impacts": [
            {
                "time_s": round(i.time_s, 5),
                "impulse_ns": round(i.impulse_ns, 4),
                "material": i.material,
                "other_material": i.other_material,
            }
            for i in clip.impacts
        ],
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
