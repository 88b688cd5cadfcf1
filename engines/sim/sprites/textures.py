"""Procedural patterns and colours: everything a backdrop or a body is painted with.

Patterns are (h, w) float32 maps in about [0, 1], built from a few random numbers and OpenCV
resizes and drawing calls (milliseconds for a 600x400 canvas). No image files are read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from engines.sim.materials import OBJECT_MATERIALS, jitter_colour, material

RGB = tuple[float, float, float]


def log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(max(hi, lo * 1.01)))))


def body_size(rng: np.random.Generator, span: float, lo: float = 0.06, hi: float = 0.5) -> float:
    """A body's size in px for a picture `span` px across: mostly lo..hi of it (close-ups), a
    third of the time from 2 px up to that (far away)."""
    if rng.random() < 0.67:
        return log_uniform(rng, lo * span, hi * span)
    return log_uniform(rng, 2.0, max(lo * span, 3.0))


def noise(rng: np.random.Generator, h: int, w: int, cell: float) -> np.ndarray:
    """Smooth value noise with features about `cell` px across."""
    gh, gw = max(int(h / cell) + 2, 2), max(int(w / cell) + 2, 2)
    grid = rng.random((gh, gw)).astype(np.float32)
    big = cv2.resize(grid, (int(gw * cell), int(gh * cell)), interpolation=cv2.INTER_CUBIC)
    return np.clip(big[:h, :w], 0.0, 1.0)


def fractal(rng: np.random.Generator, h: int, w: int, cell: float, octaves: int = 4) -> np.ndarray:
    out = np.zeros((h, w), np.float32)
    total = 0.0
    for k in range(octaves):
        amp = 0.55**k
        out += amp * noise(rng, h, w, max(cell / 2**k, 1.5))
        total += amp
    return out / total


def _coords(h: int, w: int, angle: float) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    c, s = np.cos(angle), np.sin(angle)
    return xs * c + ys * s, -xs * s + ys * c


def checker(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    u, v = _coords(h, w, rng.uniform(0, np.pi))
    period = rng.uniform(4, 60)
    out = ((np.floor(u / period) + np.floor(v / period)) % 2).astype(np.float32)
    return cv2.GaussianBlur(out, (0, 0), 0.6)


def stripes(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    u, _ = _coords(h, w, rng.uniform(0, np.pi))
    period, duty = rng.uniform(3, 50), rng.uniform(0.2, 0.8)
    hard = ((u / period) % 1.0 < duty).astype(np.float32)
    soft = 0.5 + 0.5 * np.sin(2 * np.pi * u / period)
    return cv2.GaussianBlur(hard, (0, 0), 0.6) if rng.random() < 0.6 else soft


def wood(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    _u, v = _coords(h, w, rng.choice([0.0, np.pi / 2]) + rng.uniform(-0.1, 0.1))
    warp = noise(rng, h, w, rng.uniform(20, 80)) * rng.uniform(5, 30)
    grain = 0.5 + 0.5 * np.sin(2 * np.pi * (v + warp) / rng.uniform(2, 9))
    planks = np.floor(v / rng.uniform(12, 60))
    shade = (np.sin(planks * 12.9898) * 43758.5453) % 1.0
    return (0.55 + 0.25 * grain + 0.2 * shade).astype(np.float32)


def gravel(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    out = 0.5 + 0.5 * (noise(rng, h, w, rng.uniform(1.5, 4)) - 0.5) + 0.3 * noise(rng, h, w, 30)
    n = int(h * w / rng.uniform(15, 120))
    xs, ys = rng.integers(0, w, n), rng.integers(0, h, n)
    rs, vals = rng.integers(1, 4, n), rng.uniform(0.0, 1.0, n)
    for x, y, r, val in zip(xs, ys, rs, vals, strict=True):
        cv2.circle(out, (int(x), int(y)), int(r), float(val), -1, cv2.LINE_AA)
    return out


def bricks(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    bh = rng.uniform(5, 30)
    bw = bh * rng.uniform(1.5, 3.5)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    row = np.floor(ys / bh)
    xs = xs + (row % 2) * bw / 2
    mortar = (ys % bh < 1.5) | (xs % bw < 1.5)
    tone = 0.6 + 0.3 * ((np.sin(row * 7.1 + np.floor(xs / bw) * 3.7) * 9731.7) % 1.0)
    return np.where(mortar, 0.25, tone).astype(np.float32)


def gradient(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    u, _ = _coords(h, w, rng.uniform(0, 2 * np.pi))
    return ((u - u.min()) / max(float(np.ptp(u)), 1.0)).astype(np.float32)


def smooth(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return fractal(rng, h, w, rng.uniform(8, 150), int(rng.integers(1, 5)))


PATTERNS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "smooth": smooth,
    "checker": checker,
    "stripes": stripes,
    "wood": wood,
    "gravel": gravel,
    "bricks": bricks,
    "gradient": gradient,
}


def pattern(rng: np.random.Generator, h: int, w: int, kinds: tuple[str, ...] = ()) -> np.ndarray:
    name = str(rng.choice(kinds or tuple(PATTERNS)))
    return PATTERNS[name](rng, h, w)


def random_rgb(rng: np.random.Generator, dark: float = 0.05, light: float = 0.95) -> RGB:
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(0, 200), rng.uniform(dark, light) * 255]]])
    rgb = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB)[0, 0] / 255.0
    return (float(rgb[0]), float(rgb[1]), float(rgb[2]))


def near_rgb(rng: np.random.Generator, rgb: RGB, spread: float) -> RGB:
    c = np.clip(np.asarray(rgb) + rng.uniform(-spread, spread, 3), 0.0, 1.0)
    return (float(c[0]), float(c[1]), float(c[2]))


def colourise(pat: np.ndarray, c0: RGB, c1: RGB) -> np.ndarray:
    """(h, w, 3) float32: pattern 0 -> c0, 1 -> c1."""
    a, b = np.asarray(c0, np.float32), np.asarray(c1, np.float32)
    return a + pat[..., None] * (b - a)


def painted(rng: np.random.Generator, h: int, w: int, base: RGB | None = None) -> np.ndarray:
    """A random pattern in two related colours (a random pair when `base` is not given)."""
    c0 = base if base is not None else random_rgb(rng)
    c1 = near_rgb(rng, c0, rng.uniform(0.05, 0.6))
    return colourise(pattern(rng, h, w), c0, c1)


def body_colour(rng: np.random.Generator, behind: RGB | None = None) -> tuple[RGB, str | None]:
    """A body's colour and material: a material's own colour, a random one, or (sometimes)
    close to what is behind it."""
    name = str(rng.choice(OBJECT_MATERIALS)) if rng.random() < 0.8 else None
    if behind is not None and rng.random() < 0.12:
        return near_rgb(rng, behind, 0.08), name
    if name is not None and rng.random() < 0.5:
        return jitter_colour(material(name), rng, 0.08), name
    return random_rgb(rng), name


@dataclass(frozen=True)
class Look:
    """Exposure of a shot: display = gain * (contrast-scaled value) ** gamma; a gain over 1
    clips highlights later (overexposure), a small one makes a dim scene."""

    gain: float
    gamma: float
    contrast: float

    def apply(self, rgb: np.ndarray) -> np.ndarray:
        v = np.clip(0.5 + (np.asarray(rgb, np.float32) - 0.5) * self.contrast, 0.0, 1.0)
        return (self.gain * v**self.gamma).astype(np.float32)

    def rgb(self, c: RGB) -> RGB:
        v = self.apply(np.asarray(c))
        return (float(v[0]), float(v[1]), float(v[2]))


def sample_look(rng: np.random.Generator) -> Look:
    roll = rng.random()
    if roll < 0.12:  # dim
        return Look(rng.uniform(0.15, 0.45), rng.uniform(0.9, 1.6), rng.uniform(0.4, 1.0))
    if roll < 0.22:  # overexposed
        return Look(rng.uniform(1.3, 2.2), rng.uniform(0.6, 1.0), rng.uniform(0.6, 1.2))
    return Look(rng.uniform(0.75, 1.15), rng.uniform(0.75, 1.3), rng.uniform(0.5, 1.3))
