"""Pipeline caches benchmark (service.pipeline.static, .windows, .memo): what each saves, what it
costs, and how far its track is from the track without it.

    python -m bench.caches [--repeat 5]

(a) Static skip: a 10 s 1280x720 H.264 clip (crf 18) of four simulated shots in which objects
    fall, bounce and come to rest, so about half the frames do not move. Renders to WAV with and
    without static skip (window memo off in both).
(b) Motion templates: eight scenes, each a 2 s shot looped four times and encoded with H.264
    with a keyframe every 45 frames, so no two loops decode alike. Window memo from an empty
    cache, with and without templates: hit rate, and the onsets against the track without
    templates, per scene; time on the first.
(c) Incremental re-render: the clip of (a) encoded the way an editor that does not re-encode
    unchanged frames leaves it (fixed 15-frame GOPs, constant QP: an unchanged GOP decodes to the
    same pixels), then edited: the first 45 frames trimmed, or a 2 s shot in the middle replaced.
    The edit is rendered with the memo holding the original's windows, and without the memo.
    Last, the trimmed clip re-encoded whole (crf 18, as (a)): no frame decodes as before.

All renders run in one process, interleaved within each repeat (the order alternates), so a
shared machine's noise falls on both sides of every ratio alike; times are medians. "Compute" is
the pipeline's own time (preprocess, encoder, generator, vocoder, memo), "end to end" adds the
wait for the decoder, which runs in its own process in parallel.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from bench.machine import describe
from service.cache.memory import MemoryCache
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions, RenderResult

CACHE = Path(__file__).resolve().parent / ".cache" / "caches"
SIZE = (1280, 720)
SHOTS = (101, 107, 109, 121)  # "drop" scenes that rest for 46-61% of 2.5 s
REPLACEMENT = 118
LOOPED = tuple(range(21, 29))  # the scenes of the looped clips
TRIM, REPLACED = 45, (150, 210)
CRF = {"crf": "18", "preset": "veryfast"}
LOOP = {**CRF, "g": "45"}
# Every GOP starts on a keyframe and depends on nothing before it (closed, no B-frames, no rate
# control across GOPs): an unchanged GOP decodes to the same pixels in an edited file.
GOP = {
    "qp": "20",
    "preset": "veryfast",
    "g": "15",
    "keyint_min": "15",
    "sc_threshold": "0",
    "bframes": "0",
}
COMPUTE = ("preprocess", "encoder", "memo", "generator", "vocoder")


# --- clips --------------------------------------------------------------------------------------


def _shot(seed: int, seconds: float) -> np.ndarray:
    from engines.sim import scene_from_seed, simulate

    return simulate(
        scene_from_seed(seed, kind="drop"),
        duration_s=seconds,
        fps=30,
        width=SIZE[0],
        height=SIZE[1],
    ).frames


def _encode(path: Path, frames: np.ndarray, options: dict[str, str]) -> None:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30, options=options)
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        for k, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = k, Fraction(1, 30)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


def clips() -> dict[str, Path]:
    """The benchmark's clips, simulated and encoded once (about two minutes) into bench/.cache;
    also how many frames of the shots do not move as rendered (before H.264)."""
    names = ("shots", "original", "trimmed", "replaced", "reencoded", *(f"loop{s}" for s in LOOPED))
    paths = {name: CACHE / f"{name}.mp4" for name in names}
    paths["static"] = CACHE / "static.txt"
    if all(p.exists() for p in paths.values()):
        return paths
    CACHE.mkdir(parents=True, exist_ok=True)
    shots = np.concatenate([_shot(seed, 2.5) for seed in SHOTS])
    still = [np.array_equal(a, b) for a, b in zip(shots[1:], shots[:-1], strict=True)]
    paths["static"].write_text(f"{np.mean(still):.3f}\n")
    _encode(paths["shots"], shots, CRF)
    _encode(paths["original"], shots, GOP)
    _encode(paths["trimmed"], shots[TRIM:], GOP)
    _encode(paths["reencoded"], shots[TRIM:], CRF)
    a, b = REPLACED
    shots[a:b] = _shot(REPLACEMENT, (b - a) / 30)
    _encode(paths["replaced"], shots, GOP)
    del shots
    for seed in LOOPED:
        _encode(paths[f"loop{seed}"], np.concatenate([_shot(seed, 2.0)] * 4), LOOP)
    return paths


# --- rendering ----------------------------------------------------------------------------------


class Variant:
    """An engine with some caches on, sharing the loaded model; its renders' results."""

    def __init__(self, base: FoleyEngine, out: Path, name: str, **settings: object) -> None:
        self.settings = Settings(**settings)  # type: ignore[arg-type]
        self.base, self.out, self.name = base, out, name
        self.fresh()
        self.reset()

    def fresh(self) -> None:
        """An empty cache."""
        self.cache = MemoryCache(1 << 30)
        self.engine = FoleyEngine(self.settings, self.base.tier, self.base.backend, self.cache)

    def reset(self) -> None:
        """Forget the results so far."""
        self.results: list[RenderResult] = []
        self.seconds: list[float] = []
        self.track = np.zeros(0, np.int16)

    def render(self, clip: Path, *, timed: bool = True) -> None:
        target = self.out / f"{self.name}.wav"
        started = time.perf_counter()
        result = self.engine.render(clip, target, RenderOptions(format="wav"))
        if timed:
            self.seconds.append(time.perf_counter() - started)
            self.results.append(result)
            self.track = read_track(target)

    def median(self, what: Callable[[RenderResult], float]) -> float:
        return statistics.median(what(r) for r in self.results)

    @property
    def end_to_end(self) -> float:
        return statistics.median(self.seconds)

    @property
    def compute(self) -> float:
        return self.median(lambda r: sum(r.timings.get(s, 0.0) for s in COMPUTE))


def read_track(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.concatenate([f.to_ndarray().ravel() for f in container.decode(audio=0)])


def interleaved(repeat: int, sides: list[Callable[[], object]]) -> None:
    for k in range(repeat):
        for side in sides if k % 2 == 0 else sides[::-1]:
            side()


def differences(track: np.ndarray, reference: np.ndarray) -> tuple[int, int, int, int]:
    """Largest difference of two 16-bit tracks (in steps of 1/32768), and their onsets: matched,
    in the reference, extra."""
    from engines.eval.onsets import detect_onsets, match_onsets

    steps = int(np.abs(track.astype(np.int32) - reference).max())
    expected = detect_onsets(reference / 32768.0, 48000)
    score = match_onsets(detect_onsets(track / 32768.0, 48000), expected)
    return steps, score.true_positives, len(expected), score.false_positives


def compare(track: np.ndarray, reference: np.ndarray) -> str:
    steps, matched, expected, extra = differences(track, reference)
    peak = int(np.abs(reference).max())
    return (
        f"max |difference| {steps} (peak {peak}, steps of 1/32768), onsets "
        f"{matched}/{expected} matched, {extra} extra"
    )


# --- tables -------------------------------------------------------------------------------------


def table(header: tuple[str, str, str], rows: list[tuple[str, float, float]]) -> None:
    print(f"| {'measure':<34} | {header[0]:>12} | {header[1]:>12} | {header[2]:>7} |")
    print(f"|{'-' * 36}|{'-' * 14}|{'-' * 14}|{'-' * 9}|")
    for name, a, b in rows:
        print(f"| {name:<34} | {a:12.3f} | {b:12.3f} | {b / a if a else 0:6.2f}x |")


def static_skip(base: FoleyEngine, paths: dict[str, Path], out: Path, repeat: int) -> None:
    clip = paths["shots"]
    off = Variant(base, out, "off", static_threshold=0.0, window_memo=False)
    on = Variant(base, out, "on", window_memo=False)
    interleaved(repeat, [lambda: off.render(clip), lambda: on.render(clip)])
    reuse = on.results[0].reuse
    print(f"\n(a) static skip, threshold {on.settings.static_threshold}: {clip.name}, 10 s")
    print(
        f"frames that do not move (as simulated, before H.264): "
        f"{float(paths['static'].read_text()):.0%}; frames the encoder skipped: "
        f"{reuse.frames_static} of {reuse.frames} ({reuse.frames_static / reuse.frames:.0%})\n"
    )
    stages = (("encoder", "encoder"), ("preprocess (incl. motion test)", "preprocess"))
    times(("without (s)", "with (s)"), off, on, stages)
    print(f"\ntrack with static skip against without: {compare(on.track, off.track)}")
    # For scale: what encoding the same frames another way does to the track, without skip.
    other = Variant(base, out, "other", static_threshold=0.0, window_memo=False)
    other.render(paths["original"])
    print(f"same frames, fixed-QP encode of (c), no skip: {compare(other.track, off.track)}")


def templates(base: FoleyEngine, paths: dict[str, Path], out: Path, repeat: int) -> None:
    exact = Variant(base, out, "exact", window_memo=True, motion_templates=False)
    tpl = Variant(base, out, "templates", window_memo=True, motion_templates=True)

    def cold(variant: Variant, clip: Path) -> Callable[[], None]:
        # Every hit comes from the loop itself, not from an earlier repeat.
        return lambda: (variant.fresh(), variant.render(clip))

    loops = [paths[f"loop{seed}"] for seed in LOOPED]
    print(f"\n(b) motion templates: {len(loops)} scenes, each a 2 s shot looped 4 times, H.264; "
          "an empty cache for each")  # fmt: skip
    print("| loop | windows | template hits | exact hits | onsets matched | extra onsets | "
          "max abs difference (1/32768) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    totals = np.zeros(5, np.int64)
    for clip in loops:
        for variant in (exact, tpl):
            variant.reset()
            cold(variant, clip)()
        reuse = tpl.results[0].reuse
        steps, matched, expected, extra = differences(tpl.track, exact.track)
        print(f"| {clip.stem} | {reuse.windows} | {reuse.windows_template} | "
              f"{reuse.windows_exact} | {matched}/{expected} | {extra} | {steps} |")  # fmt: skip
        totals += [reuse.windows, reuse.windows_template, matched, expected, extra]
    windows, hits, matched, expected, extra = totals.tolist()
    print(f"\nall: template hits {hits} of {windows} windows ({hits / windows:.0%}); onsets "
          f"{matched}/{expected} matched, {extra} extra")  # fmt: skip
    exact.reset()
    tpl.reset()
    clip = loops[0]
    interleaved(repeat, [cold(exact, clip), cold(tpl, clip)])
    print(f"\ntime on {clip.name}:\n")
    times(("without (s)", "with (s)"), exact, tpl, (("vocoder", "vocoder"),))
    print("(contact events are the generator's own in both: a template reuses the vocoder's part)")


def incremental(base: FoleyEngine, paths: dict[str, Path], out: Path, repeat: int) -> None:
    memo = Variant(base, out, "memo", window_memo=True, motion_templates=False)
    full = Variant(base, out, "full", window_memo=False)
    original = paths["original"]
    print(f"\n(c) incremental re-render: {original.name}, 10 s, fixed 15-frame GOPs")

    def cold() -> None:
        memo.fresh()
        memo.render(original)

    interleaved(repeat, [lambda: full.render(original), cold])
    print(
        f"\nfirst render, empty cache: memo entries {memo.cache.bytes / 1e6:.1f} MB; "
        f"track: {compare(memo.track, full.track)}\n"
    )
    times(("memo off (s)", "memo on (s)"), full, memo)
    edits = {
        "original": (original, "the same clip again"),
        "trimmed": (original, f"the first {TRIM} frames trimmed"),
        "replaced": (original, f"frames {REPLACED[0]}-{REPLACED[1]} replaced by another shot"),
        "reencoded": (paths["shots"], f"the first {TRIM} frames trimmed, all re-encoded"),
    }
    for edit, (before, what) in edits.items():
        memo.reset()
        full.reset()

        def warm(edit: str = edit, before: Path = before) -> None:
            memo.fresh()
            memo.render(before, timed=False)
            memo.render(paths[edit])

        interleaved(repeat, [lambda edit=edit: full.render(paths[edit]), warm])
        reuse = memo.results[0].reuse
        print(
            f"\n{what}, the original's windows in the cache: windows recomputed "
            f"{reuse.windows_recomputed} of {reuse.windows} "
            f"({reuse.windows_recomputed / reuse.windows:.0%}), frames "
            f"{reuse.frames_recomputed / reuse.frames:.0%}; encoder skipped on {reuse.frames_known}"
            f" frames (feature cache) and {reuse.frames_static} (static) of {reuse.frames}; "
            f"track against the full re-render: {compare(memo.track, full.track)}\n"
        )
        times(("full (s)", "re-render (s)"), full, memo)


def times(
    header: tuple[str, str], a: Variant, b: Variant, stages: tuple[tuple[str, str], ...] = ()
) -> None:
    """The table of a's and b's times: the (label, stage) `stages`, compute, end to end."""
    table(
        (*header, "ratio"),
        [
            *((label, a.median(_stage(st)), b.median(_stage(st))) for label, st in stages),
            ("compute (pipeline stages)", a.compute, b.compute),
            ("end to end, WAV", a.end_to_end, b.end_to_end),
        ],
    )


def _stage(name: str) -> Callable[[RenderResult], float]:
    return lambda result: result.timings.get(name, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    paths = clips()
    base = FoleyEngine.load(Settings())
    base.warmup()
    out = CACHE / "out"
    out.mkdir(exist_ok=True)
    print(f"machine: {describe()}")
    print(f"medians of {args.repeat} interleaved runs")
    static_skip(base, paths, out, args.repeat)
    templates(base, paths, out, args.repeat)
    incremental(base, paths, out, args.repeat)


if __name__ == "__main__":
    main()
