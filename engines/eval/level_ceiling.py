"""How far a tier's impact level could follow the impulse, given what it does not know.

    python -m engines.eval.level_ceiling [--tier motion] [--clips 48]

The held-out scenes of `bench.eval` (seeds 3000000 on; every sixth, a silent kind, is left out)
are rendered as `foley generate` does; each impact marker is matched to the simulator's impact
within 50 ms, one-to-one, nearest first. Printed: Spearman of the simulator's impulse against
the marker's impulse alone, and against it times what the tier is not told of the object, in
turn: its true size cubed, and that times its material's density (a mass); and, as the physics'
own row, the approach speed times size cubed times density.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from bench.eval import FPS_CHOICES, SEED
from engines.data.clips import write_video_clip
from engines.sim.materials import material
from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

TOLERANCE_S = 0.05


def pairs(engine: FoleyEngine, clips: int) -> np.ndarray:
    """Rows (true impulse, marker impulse, size m, approach speed m/s, density kg/m^3)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(clips):
            if i % 6 == 5:
                continue
            video = Path(tmp) / "clip.mp4"
            clip = write_video_clip(
                video, seed=SEED + i, duration_s=5.0, fps=FPS_CHOICES[i % len(FPS_CHOICES)],
                width=320, height=180, holdout=True,
            )  # fmt: skip
            result = engine.render(video, Path(tmp) / "out.wav", RenderOptions(loudness=None))
            used: set[int] = set()
            for m in (m for m in result.markers if m.kind == "impact" and m.strength):
                near = [
                    (abs(imp.time_s - m.time_s), j)
                    for j, imp in enumerate(clip.impacts)
                    if abs(imp.time_s - m.time_s) <= TOLERANCE_S and j not in used
                ]
                if not near:
                    continue
                j = min(near)[1]
                used.add(j)
                imp = clip.impacts[j]
                density = material(imp.material).density
                rows.append((imp.impulse_ns, m.strength, imp.size_m, imp.speed_mps, density))
    return np.asarray(rows, float).reshape(-1, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="motion")
    parser.add_argument("--clips", type=int, default=48)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    engine = FoleyEngine.load(Settings(default_tier=args.tier))
    truth, marker, size, speed, density = pairs(engine, args.clips).T
    print(f"{len(truth)} impacts matched; Spearman with the simulator's impulse:")
    rows = {
        "the marker's impulse": marker,
        "x true size^3": marker * size**3,
        "x true size^3 x density": marker * size**3 * density,
        "approach speed x size^3 x density (physics)": speed * size**3 * density,
    }
    for name, value in rows.items():
        print(f"| {name} | {spearmanr(truth, value)[0]:.2f} |")


if __name__ == "__main__":
    main()
