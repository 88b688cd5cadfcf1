"""Fit the contacts tier's impulse estimate (service.pipeline.contacts.strength) on the
localiser's real tracks (engines.tracks.observed), and write it into the tier's config:

    python -m engines.tracks.strength [--clips 720] [--tier objects] [--write]

Least squares in logs over every positive interval with an impulse (a floor or object impact),
ridge-regularised; clips of seeds divisible by 5 are held out for the printed rank correlation.
"""

from __future__ import annotations

import argparse
import json
import logging

import numpy as np
from scipy.stats import spearmanr

from engines.tracks.observed import ARTIFACTS, build
from service.pipeline.contacts import strength
from service.pipeline.contacts.tier import load_contact_tier

log = logging.getLogger(__name__)
RIDGE = 1e-2


def samples(clips: int, tier_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the model's inputs (S, F), log impulse (S,), held out (S,) bool)."""
    tier = load_contact_tier(ARTIFACTS, tier_name, strength=False)
    materials = len(tier.materials)
    xs, ys, held = [], [], []
    for item in build(clips, tier_name):
        t = item.track
        for k in np.flatnonzero((t.label == 1) & np.isfinite(item.impulse)):
            f = strength.features(
                t.times_s, t.pixels, item.radius, int(k), tier.head_config, tier.height
            )
            material = item.materials[max(0, k - 8) : k + 2].mean(axis=0)
            xs.append(strength.design(f, int(np.argmax(material)), materials))
            ys.append(np.log(float(item.impulse[k])))
            held.append(item.seed % 5 == 0)
    return np.array(xs), np.array(ys), np.array(held)


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    gram = x.T @ x + RIDGE * len(x) * np.eye(x.shape[1])
    return np.linalg.solve(gram, x.T @ y)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=720)
    parser.add_argument("--tier", default="objects")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    x, y, held = samples(args.clips, args.tier)
    w = fit(x[~held], y[~held])
    rho = spearmanr(x[held] @ w, y[held]).statistic
    base = spearmanr(x[held][:, 0], y[held]).statistic
    print(
        f"{len(y)} impacts ({held.sum()} held out): Spearman of the estimate with the impulse "
        f"{rho:.3f} (the velocity jump alone {base:.3f})"
    )
    w = fit(x, y)
    if args.write:
        path = ARTIFACTS / args.tier / "config.json"
        raw = json.loads(path.read_text())
        raw["stages"]["strength"] = {
            "features": list(strength.NAMES),
            "weights": w.round(5).tolist(),
        }
        path.write_text(json.dumps(raw, indent=1) + "\n")
        print(f"wrote the weights to {path}")


if __name__ == "__main__":
    main()
