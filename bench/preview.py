"""Live preview benchmark: N concurrent real-time sessions against `foley serve` over loopback.

    python -m bench.preview [--sessions 1 4 8 12 16] [--seconds 10] [--tier objects --size 192 108]

Starts the service in its own process (as deployed; the clients' own work must not share its
interpreter), waits until it is ready, then for each session count streams the same 30 fps
simulator clip from that many clients at once, each at real-time pace, and prints per count:
server compute per batch (p50/p99), client-side latency from a frame's send to the arrival of
the audio it completed (p50/p99, worst session), jitter (standard deviation of the intervals
between audio chunks arriving, worst session), first audio after the first frame, and underruns
(chunks arriving after a player with a 100 ms buffer would have played them). The jitter of the
clients' own frame sending is printed beside the audio's: the server answers each frame, so the
audio cannot arrive more evenly than the frames were sent. Sessions start
staggered over one frame interval, as independent clients would.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import numpy as np

from bench.machine import describe
from bench.servers import foley_serve
from service.preview.client import ClientOptions, Report, stream_file

CACHE = Path(__file__).resolve().parent / ".cache"


def bench_clip(seconds: float) -> Path:
    path = CACHE / f"sim_320x180_30fps_{seconds:g}s.mp4"
    if not path.exists():
        from engines.data.clips import write_video_clip

        CACHE.mkdir(exist_ok=True)
        write_video_clip(
            path, seed=20_001, duration_s=seconds, fps=30, width=320, height=180, kind="multi"
        )
    return path


async def run_sessions(
    clip: Path, url: str, n: int, options: ClientOptions | None = None
) -> list[Report]:
    options = options or ClientOptions()

    async def one(i: int) -> Report:
        await asyncio.sleep(i / 30 / n)
        return await stream_file(clip, url, options)

    return await asyncio.gather(*(one(i) for i in range(n)))


def row(n: int, reports: list[Report], wall_s: float) -> str:
    errors = [r.error["code"] for r in reports if r.error]
    summaries = [r.summary() for r in reports]
    windows = [m for r in reports for m in r.server_stats]  # each about a second of one session
    compute = [m["compute_ms_p50"] for m in windows] or [float("nan")]
    compute99 = [m["compute_ms_p99"] for m in windows] or [float("nan")]
    lat50 = np.median([s["latency_ms_p50"] for s in summaries])
    lat99 = max(s["latency_ms_p99"] for s in summaries)
    jitter = max(s["jitter_ms"] for s in summaries)
    send_jitter = max(s["send_jitter_ms"] for s in summaries)
    first = max(s["first_audio_ms"] or float("nan") for s in summaries)
    underruns = sum(s["underruns"] for s in summaries)
    batch = np.mean([r.server_stats[-1]["batch_mean"] for r in reports if r.server_stats] or [0])
    return (
        f"| {n} | {np.median(compute):.1f} / {max(compute99):.1f} | {lat50:.1f} / {lat99:.1f} "
        f"| {jitter:.1f} ({send_jitter:.1f}) | {first:.0f} | {underruns} | {batch:.2f} "
        f"| {wall_s:.1f} | {', '.join(errors) or '-'} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8, 12, 16])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tier", default=None, help="the served tier (default: the configured)")
    parser.add_argument("--size", type=int, nargs=2, default=(96, 96), metavar=("W", "H"))
    args = parser.parse_args(argv)
    clip = bench_clip(args.seconds)
    env = {"FOLEY_PREVIEW_MAX_SESSIONS": str(max(args.sessions))}
    if args.tier is not None:
        env["FOLEY_DEFAULT_TIER"] = args.tier
    width, height = args.size
    options = ClientOptions(width=width, height=height)
    with foley_serve(env) as port:
        url = f"ws://127.0.0.1:{port}/v1/preview"
        print(describe())
        print(
            f"clip: {clip.name}, sent as {width}x{height} rgb24 at real-time pace; server: "
            f"foley serve, tier {args.tier or 'default'}\n"
        )
        print(
            "| sessions | server compute ms p50 / p99 | latency ms p50 / p99 (worst) "
            "| jitter ms, audio (frames sent) (worst) | first audio ms (worst) | underruns "
            "| sessions per batch | wall s | errors |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        asyncio.run(run_sessions(clip, url, 1, options))  # warm the first-run paths
        for n in args.sessions:
            started = time.perf_counter()
            reports = asyncio.run(run_sessions(clip, url, n, options))
            print(row(n, reports, time.perf_counter() - started), flush=True)


if __name__ == "__main__":
    main()
