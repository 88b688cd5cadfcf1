"""Offline path benchmark: a 10 s 1280x720 H.264 30 fps clip from the simulator.

    python -m bench.offline [--repeat 5] [--tier objects]

Prints decode-only time (the floor: PyAV decoding every frame, nothing else), the service's
decode path alone (isolated child process, resize to model input), and full renders to WAV and
MP4 with the time of each stage (loudness normalisation, the default, is part of `write`), and
to WAV at the model's own level. Medians over --repeat runs, all measured in one process so the
ratios compare like with like on a shared machine.

The service is imported inside the functions, not at the top: each decoder child imports the
calling program's `__main__` module (`service.media.decode`). Importing the service at the top
here made every decode start about 30 ms later; under `foley generate` the child imports only
the CLI module (about 7 ms), and this program now imports less than that.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

import av

from bench.machine import describe

if TYPE_CHECKING:
    from service.pipeline.engine import FoleyEngine

CACHE = Path(__file__).resolve().parent / ".cache"
CLIP_SECONDS = 10.0


def bench_clip() -> Path:
    path = CACHE / "sim_1280x720_30fps_10s.mp4"
    if not path.exists():
        from engines.data.clips import write_video_clip

        CACHE.mkdir(exist_ok=True)
        write_video_clip(
            path, seed=20_000, duration_s=CLIP_SECONDS, fps=30, width=1280, height=720, kind="multi"
        )
    return path


def decode_only(path: Path) -> float:
    start = time.perf_counter()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for _ in container.decode(stream):
            pass
    return time.perf_counter() - start


def decode_path(path: Path, engine: FoleyEngine) -> float:
    from service.media.decode import open_video

    start = time.perf_counter()
    letterbox = engine.tier.letterbox
    with open_video(
        path,
        width=engine.tier.width,
        height=engine.tier.height,
        limits=engine.limits,
        letterbox=letterbox,
    ) as stream:
        for _ in stream:
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tier", default=None, help="the tier (default: the configured one)")
    args = parser.parse_args()
    from service.config import Settings
    from service.pipeline.engine import FoleyEngine
    from service.pipeline.types import RenderOptions

    clip = bench_clip()
    # The window memo off: every repeat renders the clip again instead of answering from it.
    engine = FoleyEngine.load(Settings(window_memo=False), args.tier)
    engine.warmup()
    out = CACHE / "out"
    out.mkdir(exist_ok=True)
    floor, dpath, renders = [], [], {"wav": [], "mp4": [], "raw": []}
    stages: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        floor.append(decode_only(clip))
        dpath.append(decode_path(clip, engine))
        for fmt in renders:
            # "raw": WAV at the model's own level, to show what loudness normalisation costs.
            options = (
                RenderOptions(format="wav", loudness=None)
                if fmt == "raw"
                else RenderOptions(format=fmt)  # type: ignore[arg-type]
            )
            started = time.perf_counter()
            result = engine.render(clip, out / f"foley.{options.format}", options)
            renders[fmt].append(time.perf_counter() - started)
            if fmt == "wav":
                for stage, seconds in result.timings.items():
                    stages.setdefault(stage, []).append(seconds)
    med = statistics.median
    print(f"machine: {describe()}")
    print(
        f"clip: {clip.name}, {CLIP_SECONDS:.0f} s, tier {engine.tier.name}, "
        f"medians of {args.repeat} runs\n"
    )
    print(f"| {'measure':<36} | {'seconds':>8} | {'x real time':>11} |")
    print(f"|{'-' * 38}|{'-' * 10}|{'-' * 13}|")

    def row(name: str, seconds: float) -> None:
        print(f"| {name:<36} | {seconds:8.3f} | {seconds / CLIP_SECONDS:11.3f} |")

    row("decode only (PyAV, floor)", med(floor))
    row("decode path (child process + resize)", med(dpath))
    for stage in stages:
        if stage != "total":
            row(f"  stage in WAV render: {stage}", med(stages[stage]))
    row("end to end, WAV", med(renders["wav"]))
    row("end to end, MP4 (video copied + AAC)", med(renders["mp4"]))
    row("end to end, WAV, --loudness off", med(renders["raw"]))
    print()
    print(
        f"end-to-end RTF (WAV): {med(renders['wav']) / CLIP_SECONDS:.3f}   "
        f"end-to-end / decode-only: {med(renders['wav']) / med(floor):.2f}x (WAV), "
        f"{med(renders['mp4']) / med(floor):.2f}x (MP4), "
        f"{med(renders['raw']) / med(floor):.2f}x (WAV, loudness off)"
    )
    print(
        "(the 'decode' stage time is time spent waiting on the decoder; it runs in its own "
        "process, in parallel with inference)"
    )


if __name__ == "__main__":
    main()
