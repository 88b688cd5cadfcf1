"""GPU backends against the CPU backend, in one run of a few minutes:

    python -m bench.gpu [--tier preview] [--sessions 1 8 32 128] [--steps 300] [--device cuda]

For each GPU backend present (cuda; tensorrt where the package is installed):
  1. agreement: a 10 s simulated clip streamed through the backend and through the cpu backend,
     the tracks' log-mel distance (engines.eval.quality) and onset F1 (engines.eval.onsets, 2 ms);
  2. offline: the real-time factor of rendering the 10 s 720p clip to WAV, with decode-only
     beside it (PyAV needed; "-" without it);
  3. live: per-frame step latency p50/p99 for each session count (one frame of every session
     per step, as the preview worker batches them), the largest count that keeps 30 fps, each
     stage's share, the GPU's idle share between stages (1 - the stages' device time / wall
     time), and peak device memory.
Targets (docs/gpu.md): live p99 <= 3 ms for one session, >= 256 sessions at 30 fps, offline
bound by decode, tensorrt >= 2x the cuda backend's live throughput.

`--device cpu` runs the cuda backend's code on torch's CPU device: a check that the script
works (tests/test_bench_gpu.py), not a measurement.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.machine import describe
from service.config import Settings
from service.pipeline.backends.base import Backend, backend_present, create_backend
from service.pipeline.loading import load_engine

LIVE_FPS = 30
CLIP_S = 10.0  # the offline clip's length (--seconds)
CACHE = Path(__file__).resolve().parent / ".cache"


class Timed:
    """A backend that times each stage call: wall time, and on a GPU the device time between
    events recorded on the calling stream."""

    def __init__(self, inner: Backend, torch=None) -> None:
        self.inner, self.torch = inner, torch
        self.name, self.tier = inner.name, inner.tier
        self.wall: dict[str, list[float]] = defaultdict(list)
        self.device: dict[str, list[float]] = defaultdict(list)

    def info(self):
        return self.inner.info()

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self.torch
        if torch is not None and torch.cuda.is_available():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        began = time.perf_counter()
        out = self.inner.run(stage, inputs)
        self.wall[stage].append(time.perf_counter() - began)
        if torch is not None and torch.cuda.is_available():
            end.record()
            end.synchronize()
            self.device[stage].append(start.elapsed_time(end) / 1000)
        return out

    def reset(self) -> None:
        self.wall.clear()
        self.device.clear()


def sim_clip(size: tuple[int, int], seconds: float) -> Path:
    """A simulated scene with contacts (cached); where the simulator (pybullet) is missing, as
    on a machine set up only to run models, the service's own moving-square test clip."""
    path = CACHE / f"gpu_{size[0]}x{size[1]}_{seconds:g}s.mp4"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        try:
            from engines.data.clips import write_video_clip
        except ImportError:
            from service.media.clip import write_test_clip

            return write_test_clip(path, seconds, size)
        write_video_clip(path, seed=20_002, duration_s=seconds, fps=30, width=size[0],
                         height=size[1], kind="multi")  # fmt: skip
    return path


def agreement(tier: str, backend: Backend, clip: Path, workdir: Path) -> tuple[float, float]:
    from engines.eval.onsets import detect_onsets, match_onsets
    from engines.eval.quality import spectral_distance
    from engines.eval.sync import read_audio
    from engines.models.mel import LogMel
    from service.pipeline.engine import FoleyEngine
    from service.pipeline.types import RenderOptions

    settings = Settings(window_memo=False)
    reference = load_engine(settings, tier)
    tracks = []
    for engine in (reference, FoleyEngine(settings, reference.tier, backend)):
        engine.render(clip, workdir / "a.wav", RenderOptions(format="wav", loudness=None))
        tracks.append(read_audio(workdir / "a.wav")[0])
    mel = LogMel(sample_rate=48000, hop=400, n_fft=1600, n_mels=64, fmin=0.0, fmax=24000.0,
                 log_floor=1e-5)  # fmt: skip
    distance = spectral_distance(tracks[1], tracks[0], mel).log_mel
    f1 = match_onsets(detect_onsets(tracks[1], 48000), detect_onsets(tracks[0], 48000), 0.002).f1
    return distance, f1


def offline(
    tier: str, backend: Backend, clip: Path, workdir: Path, seconds: float
) -> tuple[float, float]:
    """-> (render seconds per video second, decode-only seconds per video second)."""
    from service.media.decode import DecodeLimits, open_video
    from service.pipeline.engine import FoleyEngine
    from service.pipeline.types import RenderOptions

    engine = FoleyEngine(Settings(), backend.tier, backend)
    engine.render(clip, workdir / "warm.wav", RenderOptions(format="wav"))
    began = time.perf_counter()
    engine.render(clip, workdir / "o.wav", RenderOptions(format="wav"))
    render_s = time.perf_counter() - began
    began = time.perf_counter()
    with open_video(clip, width=engine.tier.width, height=engine.tier.height,
                    limits=DecodeLimits.from_settings(engine.settings)) as stream:  # fmt: skip
        for _ in stream:
            pass
    return render_s / seconds, (time.perf_counter() - began) / seconds


def live(timed: Timed, sessions: int, steps: int) -> dict:
    """`steps` live steps of `sessions` sessions, one frame each per step."""
    from service.pipeline.runner import create_runner, gather

    runner = create_runner(timed.tier, timed)
    streams = [runner.open() for _ in range(sessions)]
    tier = timed.tier
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (8, 1, tier.height, tier.width, 3), np.uint8)  # never static
    latencies = []
    for step in range(steps + 10):
        pts = np.array([step / LIVE_FPS])
        if step == 10:
            timed.reset()  # the first steps warm caches, graphs and allocators
        began = time.perf_counter()
        gather(runner.push(streams, [(pts, frames[step % len(frames)])] * sessions), sessions)
        if step >= 10:
            latencies.append(time.perf_counter() - began)
    wall = sum(latencies)
    stages = {k: sum(v) / wall for k, v in timed.wall.items()}
    busy = sum(sum(v) for v in timed.device.values())
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * float(np.percentile(latencies, 99)),
        "real_time": float(np.percentile(latencies, 99)) <= 1 / LIVE_FPS,
        "stages": stages,
        "idle": (1 - busy / wall) if timed.device else None,
    }


def backends(device: str) -> list[str]:
    if device == "cpu":
        return ["cuda"]
    return [n for n in ("cuda", "tensorrt") if backend_present(n)]


def build(name: str, tier: str, device: str) -> Backend:
    tier_config = load_engine(Settings(), tier).tier
    if name == "cuda":
        from service.pipeline.backends.cuda import CudaBackend

        return CudaBackend(tier_config, device=device)
    return create_backend(name, tier_config)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="preview")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--seconds", type=float, default=CLIP_S, help="clip length")
    parser.add_argument("--skip-offline", action="store_true")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("bench.gpu needs PyTorch") from None
    print(describe())
    if args.device == "cuda" and torch.cuda.is_available():
        print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}")  # fmt: skip
    names = backends(args.device)
    if not names:
        raise SystemExit("no GPU backend can start here (torch finds no CUDA device)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        clip = sim_clip((320, 180), args.seconds)
        for name in names:
            backend = build(name, args.tier, args.device)
            info = backend.info()
            print(f"\n## {name} on {info.device}: {args.tier}, precision {info.precision}")
            distance, f1 = agreement(args.tier, backend, clip, workdir)
            print(f"agreement with cpu: log-mel distance {distance:.4f}, onset F1 {f1:.3f}")
            if not args.skip_offline:
                big = sim_clip((1280, 720), args.seconds)
                rtf, decode = offline(args.tier, backend, big, workdir, args.seconds)
                print(f"offline {args.seconds:g} s 720p: {rtf:.4f} s/s rendered, "
                      f"decode only {decode:.4f} s/s")  # fmt: skip
            print("\n| sessions | p50 ms | p99 ms | 30 fps | stages (share of wall) | GPU idle |")
            print("|---|---|---|---|---|---|")
            largest = 0
            for n in args.sessions:
                timed = Timed(backend, torch if args.device == "cuda" else None)
                row = live(timed, n, args.steps)
                largest = n if row["real_time"] else largest
                stages = ", ".join(f"{k} {v:.0%}" for k, v in row["stages"].items())
                idle = "-" if row["idle"] is None else f"{row['idle']:.0%}"
                print(f"| {n} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
                      f"{'yes' if row['real_time'] else 'no'} | {stages} | {idle} |")  # fmt: skip
            print(f"largest session count at 30 fps: {largest} (of {args.sessions})")
            if args.device == "cuda":
                peak = torch.cuda.max_memory_allocated() / 2**20
                print(f"device memory: peak {peak:.0f} MiB allocated")


if __name__ == "__main__":
    main()
