"""The body library: tools held at one end (sticks, hammers, mallets, bats, rackets) and free
bodies (balls, boxes, plates, polygons, blobs, compounds, barbells, hands, boots).

Tools have their origin at the grip and point along +x, so turning the pose's angle swings them
about the wrist. Free bodies have their origin near their middle. Each `Body` knows the real
size it stands for, which sets the scale (px per metre) that decides what is loud enough to hear.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.sim.sprites.scene import Actor
from engines.sim.sprites.shapes import (
    Paint,
    Shape,
    ellipse,
    polygon,
    rasterise,
    rounded_rect,
    union,
)
from engines.sim.sprites.textures import RGB, Look, body_colour, near_rgb, pattern

TOOLS = ("stick", "drumstick", "hammer", "mallet", "bat", "racket")
FREE = ("ball", "ellipse", "box", "plate", "polygon", "blob", "compound", "barbell")
REAL_SIZE_M = {
    "stick": 0.45, "drumstick": 0.4, "hammer": 0.33, "mallet": 0.35, "bat": 0.85,
    "racket": 0.68, "ball": 0.07, "ellipse": 0.12, "box": 0.3, "plate": 0.25, "polygon": 0.2,
    "blob": 0.2, "compound": 0.3, "barbell": 1.6, "hand": 0.19, "boot": 0.29, "foot": 0.26,
}  # fmt: skip


@dataclass(frozen=True)
class Body:
    kind: str
    parts: tuple[tuple[Shape, Paint], ...]
    material: str | None

    @property
    def shape(self) -> Shape:
        return union(*(s for s, _ in self.parts))

    def mirrored(self, axis: int = 1) -> Body:
        """The same body flipped in its own frame: axis 1 top to bottom, axis 0 left to right."""
        parts = tuple((_flip(s, axis), p) for s, p in self.parts)
        return Body(self.kind, parts, self.material)

    def actor(self, motion) -> Actor:
        shape = self.shape
        return Actor(
            shape, rasterise(list(self.parts)), motion, self.material, REAL_SIZE_M[self.kind]
        )


def _flip(shape: Shape, axis: int) -> Shape:
    f = np.array([1.0, -1.0]) if axis == 1 else np.array([-1.0, 1.0])
    return Shape(
        tuple((cx * f[0], cy * f[1], a, b, -ang) for cx, cy, a, b, ang in shape.ellipses),
        tuple(p * f for p in shape.polygons),
    )


def paint(rng: np.random.Generator, look: Look, rgb: RGB) -> Paint:
    texture = None
    if rng.random() < 0.3:
        texture = 0.7 + 0.6 * pattern(rng, 24, 24, ("smooth", "stripes", "gravel", "checker"))
    outline = float(rng.choice([0.3, 1.8])) if rng.random() < 0.2 else None
    return Paint(
        look.rgb(rgb),
        shade=float(rng.uniform(0, 0.9)),
        shade_angle=float(rng.uniform(0, 2 * np.pi)),
        texture=texture,
        outline=outline,
    )


def _taper(x0: float, x1: float, w0: float, w1: float) -> Shape:
    return polygon(np.array([[x0, -w0 / 2], [x1, -w1 / 2], [x1, w1 / 2], [x0, w0 / 2]]))


def tool(rng: np.random.Generator, kind: str, length: float, look: Look, behind: RGB) -> Body:
    """A tool `length` px long held at the origin, pointing along +x."""
    rgb, mat = body_colour(rng, behind)
    head_rgb, head_mat = body_colour(rng, behind)
    width = float(np.clip(length * rng.uniform(0.02, 0.06), 1.0, 6.0))
    x0, x1 = -0.1 * length, 0.9 * length
    handle = _taper(x0, x1, width, width * rng.uniform(0.6, 1.1))
    parts = [(handle, paint(rng, look, rgb))]
    if kind == "drumstick":
        parts.append((ellipse(x1, 0, width * 0.8, width * 0.6), paint(rng, look, rgb)))
    elif kind == "hammer":
        hw, hl = max(length * 0.12, 2.0), max(length * 0.35, 3.0)
        parts.append(
            (rounded_rect(x1 - hw, -hl / 2, x1 + hw / 2, hl / 2, 1), paint(rng, look, head_rgb))
        )
        mat = head_mat or "metal"
    elif kind == "mallet":
        r = max(length * rng.uniform(0.07, 0.14), 1.5)
        head = ellipse(x1, 0, r, r * rng.uniform(0.8, 1.6))
        parts.append((head, paint(rng, look, head_rgb)))
        mat = head_mat
    elif kind == "bat":
        parts = [(_taper(x0, x1, width, max(width * 2.5, length * 0.09)), paint(rng, look, rgb))]
    elif kind == "racket":
        a, b = 0.22 * length, 0.15 * length
        cx = x1 - a
        parts = [(_taper(x0, cx - a * 0.8, width, width), paint(rng, look, rgb))]
        parts.append((ellipse(cx, 0, a, b), paint(rng, look, head_rgb)))
        strings = near_rgb(rng, head_rgb, 0.4)
        parts.append((ellipse(cx, 0, a * 0.85, b * 0.8), Paint(look.rgb(strings))))
        mat = "plastic"
    return Body(kind, tuple(parts), mat or "wood")


def free(rng: np.random.Generator, kind: str, size: float, look: Look, behind: RGB) -> Body:
    """A free body about `size` px across, origin near its middle."""
    rgb, mat = body_colour(rng, behind)
    r = size / 2
    if kind == "ball":
        shape = ellipse(0, 0, r, r)
    elif kind == "ellipse":
        shape = ellipse(0, 0, r, r * rng.uniform(0.3, 0.9), rng.uniform(0, np.pi))
    elif kind == "box":
        asp = rng.uniform(0.3, 1.0)
        shape = rounded_rect(-r, -r * asp, r, r * asp, rng.uniform(0, 0.3) * r)
    elif kind == "plate":
        thick = max(r * rng.uniform(0.06, 0.25), 1.0)
        shape = (
            rounded_rect(-r, -thick, r, thick, thick * 0.5)
            if rng.random() < 0.5
            else ellipse(0, 0, r, thick)
        )
    elif kind == "polygon":
        shape = polygon(_convex(rng, r, int(rng.integers(3, 9))))
    elif kind == "blob":
        shape = polygon(_blob(rng, r))
    elif kind == "barbell":
        return _barbell(rng, size, look)
    else:
        return _compound(rng, size, look, behind)
    return Body(kind, ((shape, paint(rng, look, rgb)),), mat)


def _convex(rng: np.random.Generator, r: float, k: int) -> np.ndarray:
    """A random convex polygon of up to k vertices within radius r."""
    ang = rng.uniform(0, 2 * np.pi, k)
    rad = r * rng.uniform(0.6, 1.0, k)
    pts = np.stack([rad * np.cos(ang), rad * np.sin(ang)], axis=1).astype(np.float32)
    return cv2.convexHull(pts)[:, 0].astype(np.float64)


def _blob(rng: np.random.Generator, r: float, k: int = 28) -> np.ndarray:
    """A smooth random silhouette: a radius that varies with angle by a few low harmonics."""
    ang = np.linspace(0, 2 * np.pi, k, endpoint=False)
    spec = np.fft.rfft(r * (1 - 0.35 * rng.random(k)))
    spec[4:] = 0
    rad = np.fft.irfft(spec, k)
    return np.stack([rad * np.cos(ang), rad * np.sin(ang)], axis=1)


def _compound(rng: np.random.Generator, size: float, look: Look, behind: RGB) -> Body:
    parts = []
    r = size / 2
    for _ in range(int(rng.integers(2, 4))):
        c = rng.uniform(-0.4, 0.4, 2) * r
        k = rng.uniform(0.3, 0.6) * r
        shape = ellipse(c[0], c[1], k, k * rng.uniform(0.4, 1.0), rng.uniform(0, np.pi))
        if rng.random() < 0.5:
            shape = rounded_rect(c[0] - k, c[1] - k / 2, c[0] + k, c[1] + k / 2, 1)
        parts.append((shape, paint(rng, look, body_colour(rng, behind)[0])))
    return Body("compound", tuple(parts), body_colour(rng, behind)[1])


def _barbell(rng: np.random.Generator, size: float, look: Look) -> Body:
    r = size / 2
    bar = rounded_rect(-r, -max(r * 0.02, 0.6), r, max(r * 0.02, 0.6))
    pr, pt = r * rng.uniform(0.2, 0.45), max(r * rng.uniform(0.04, 0.1), 1.0)
    plates = [rounded_rect(s * r * 0.7 - pt, -pr, s * r * 0.7 + pt, pr, pt / 2) for s in (-1, 1)]
    metal = look.rgb((0.6, 0.62, 0.66))
    plate_rgb = look.rgb(tuple(rng.uniform(0.05, 0.9, 3)))
    parts = (
        (bar, Paint(metal, 0.4, np.pi / 2)),
        *tuple((p, Paint(plate_rgb, 0.5, 1.0)) for p in plates),
    )
    return Body("barbell", parts, "metal")


def hand(rng: np.random.Generator, size: float, look: Look) -> Body:
    """A hand-like blob seen from the side: palm and fingers, fingertips toward +x."""
    skin = look.rgb(tuple(np.array([0.85, 0.62, 0.5]) * rng.uniform(0.4, 1.15)))
    r = size / 2
    palm = ellipse(-0.2 * r, 0, 0.55 * r, 0.35 * r)
    fingers = union(
        *(ellipse(0.35 * r, (k - 1.5) * 0.16 * r, 0.45 * r, 0.09 * r) for k in range(4))
    )
    thumb = ellipse(-0.05 * r, -0.38 * r, 0.3 * r, 0.1 * r, -0.6)
    p = Paint(skin, float(rng.uniform(0.2, 0.7)), float(rng.uniform(0, 6.3)))
    return Body("hand", ((palm, p), (fingers, p), (thumb, p)), None)


def boot(rng: np.random.Generator, size: float, look: Look, behind: RGB) -> Body:
    """A boot or shoe in profile, toe toward +x, sole at +y."""
    rgb, _ = body_colour(rng, behind)
    r = size / 2
    sole_t = max(0.12 * r, 1.0)
    upper = rounded_rect(-r, -0.9 * r, -0.1 * r, 0.2 * r, 0.15 * r)
    toe = ellipse(0.3 * r, 0.0, 0.7 * r, 0.28 * r)
    sole = rounded_rect(-r, 0.2 * r, r, 0.2 * r + sole_t, sole_t / 2)
    p = paint(rng, look, rgb)
    sole_p = Paint(look.rgb(near_rgb(rng, rgb, 0.3)))
    return Body("boot", ((upper, p), (toe, p), (sole, sole_p)), "rubber")
