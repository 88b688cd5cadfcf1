"""Things to hit: each draws itself on the stage and returns the contact line it offers.

Lines point their normal toward the side bodies come from. A floor seen in perspective, a drum
head or a table top is a plane, not a line: a body at one depth meets it along the line where
that depth crosses the plane, so its contact line runs through the drawn surface, not along its
outline. A `frontal` surface (a wall or door facing the camera) draws nothing special: a body
moving into the picture stops on it wherever it is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engines.sim.sprites.scene import Surface
from engines.sim.sprites.stage import Stage
from engines.sim.sprites.textures import near_rgb, painted, random_rgb


def _tilted(p: np.ndarray, angle: float, half_len: float) -> Surface:
    """A line through p along (cos a, sin a), normal on the upper side."""
    return Surface((float(p[0]), float(p[1])), (np.sin(angle), -np.cos(angle)), half_len)


def floor_line(rng: np.random.Generator, stage: Stage) -> Surface:
    """A line on the floor plane (at a random depth), or a ground band drawn at the bottom."""
    w, h = stage.size
    if stage.horizon is None:
        return ground_band(rng, stage)
    y = stage.horizon + rng.uniform(0.15, 0.92) * (h - stage.horizon)
    return Surface((w / 2, float(y)), (0.0, -1.0))


def ground_band(rng: np.random.Generator, stage: Stage) -> Surface:
    w, h = stage.size
    y = rng.uniform(0.6, 0.93) * h
    hc, wc = stage.canvas.shape[:2]
    x0, x1 = stage.origin[0] - 5, stage.origin[0] + wc + 5
    band = np.array([[x0, y], [x1, y], [x1, stage.origin[1] + hc + 5], [x0, stage.origin[1] + hc]])
    stage.fill(band, painted(rng, hc, wc), shade=rng.uniform(-0.5, 0.5))
    if rng.random() < 0.6:
        stage.line((x0, y), (x1, y), random_rgb(rng), rng.uniform(1, 3))
    return Surface((w / 2, float(y)), (0.0, -1.0))


def shelf(rng: np.random.Generator, stage: Stage) -> Surface:
    w, h = stage.size
    length = rng.uniform(0.3, 0.9) * w
    mid = np.array([rng.uniform(0.3, 0.7) * w, rng.uniform(0.35, 0.85) * h])
    angle = rng.uniform(-0.25, 0.25) if rng.random() < 0.35 else 0.0
    d = np.array([np.cos(angle), np.sin(angle)])
    down = np.array([-np.sin(angle), np.cos(angle)]) * rng.uniform(3, 14)
    a, b = mid - d * length / 2, mid + d * length / 2
    hc, wc = stage.canvas.shape[:2]
    stage.fill(np.array([a, b, b + down, a + down]), painted(rng, hc, wc), rng.uniform(-0.6, 0.6))
    if rng.random() < 0.5:
        stage.line(a, b, near_rgb(rng, stage.colour_at(*mid), 0.5), 1)
    return _tilted(mid, angle, length / 2)


def table(rng: np.random.Generator, stage: Stage) -> Surface:
    w, h = stage.size
    x0, x1 = sorted(rng.uniform(-0.2, 1.2, 2) * w)
    x1 = max(x1, x0 + 0.3 * w)
    front = rng.uniform(0.45, 0.85) * h
    depth = rng.uniform(2, 0.25 * h)
    inset = rng.uniform(0, 0.15) * (x1 - x0)
    top_colour = random_rgb(rng)
    hc, wc = stage.canvas.shape[:2]
    top = np.array(
        [[x0 + inset, front - depth], [x1 - inset, front - depth], [x1, front], [x0, front]]
    )
    stage.fill(top, painted(rng, hc, wc, top_colour), rng.uniform(-0.3, 0.3))
    thick = rng.uniform(3, 12)
    edge = np.array([[x0, front], [x1, front], [x1, front + thick], [x0, front + thick]])
    stage.fill(edge, near_rgb(rng, top_colour, 0.3), rng.uniform(-0.5, 0.5))
    for x in (x0 + 4, x1 - 10):
        leg = np.array([[x, front + thick], [x + 6, front + thick], [x + 6, h + 20], [x, h + 20]])
        stage.fill(leg, near_rgb(rng, top_colour, 0.3))
    y = front - depth * rng.uniform(0.0, 0.9)
    return Surface(((x0 + x1) / 2, float(y)), (0.0, -1.0), 0.45 * (x1 - x0))


def drum(rng: np.random.Generator, stage: Stage) -> Surface:
    """A drum (or conga) head: an ellipse on a shaded shell; hits land inside the head."""
    w, h = stage.size
    a = rng.uniform(0.08, 0.28) * w
    b = a * rng.uniform(0.15, 0.5)
    cx, cy = rng.uniform(0.25, 0.75) * w, rng.uniform(0.35, 0.75) * h
    shell = random_rgb(rng)
    body = np.array([[cx - a, cy], [cx + a, cy], [cx + a * 0.9, h + 20], [cx - a * 0.9, h + 20]])
    stage.fill(body, shell, shade=rng.uniform(0.3, 0.8))
    ang = np.linspace(0, 2 * np.pi, 48, endpoint=False)
    head = np.stack([cx + a * np.cos(ang), cy + b * np.sin(ang)], axis=1)
    stage.fill(head, random_rgb(rng, 0.5, 1.0), shade=rng.uniform(-0.4, 0.2))
    rim = near_rgb(rng, shell, 0.4)
    for i in range(48):
        stage.line(head[i], head[(i + 1) % 48], rim, rng.uniform(1, 3) if i == 0 else 1.5)
    dy = rng.uniform(-0.4, 0.4) * b
    return Surface((float(cx), float(cy + dy)), (0.0, -1.0), 0.7 * a * np.sqrt(1 - (dy / b) ** 2))


def anvil(rng: np.random.Generator, stage: Stage) -> Surface:
    w, h = stage.size
    half = rng.uniform(0.1, 0.3) * w
    cx, top = rng.uniform(0.3, 0.7) * w, rng.uniform(0.4, 0.75) * h
    face = rng.uniform(5, 20)
    metal = random_rgb(rng, 0.05, 0.45)
    waist, base = half * 0.35, half * 0.8
    pts = np.array(
        [
            [cx - half, top],
            [cx + half, top],
            [cx + half, top + face],
            [cx + waist, top + face * 2],
            [cx + base, h + 20],
            [cx - base, h + 20],
            [cx - waist, top + face * 2],
            [cx - half, top + face],
        ]
    )
    stage.fill(pts, metal, shade=rng.uniform(0.3, 0.9))
    horn = np.array(
        [[cx - half, top], [cx - half * 1.6, top + face * 0.4], [cx - half, top + face]]
    )
    stage.fill(horn, metal)
    stage.line((cx - half, top), (cx + half, top), near_rgb(rng, metal, 0.3), 1)
    return Surface((float(cx), float(top)), (0.0, -1.0), half * 0.9)


def wall_edge(rng: np.random.Generator, stage: Stage) -> Surface:
    """A wall, door or post seen edge-on: its face is a vertical line in the picture."""
    w, h = stage.size
    x = rng.uniform(0.2, 0.8) * w
    side = rng.choice([-1.0, 1.0])  # which side bodies come from
    thick = rng.uniform(4, 0.4 * w)
    hc, wc = stage.canvas.shape[:2]
    y0, y1 = stage.origin[1] - 5, stage.origin[1] + hc + 5
    col = np.array([[x, y0], [x - side * thick, y0], [x - side * thick, y1], [x, y1]])
    stage.fill(col, painted(rng, hc, wc), shade=rng.uniform(-0.4, 0.4))
    if rng.random() < 0.6:
        stage.line((x, y0), (x, y1), random_rgb(rng), rng.uniform(1, 3))
    return Surface((float(x), h / 2), (float(side), 0.0))


def frontal(rng: np.random.Generator, stage: Stage) -> Surface:
    """A surface facing the camera: the contact line is invisible and at any angle."""
    w, h = stage.size
    angle = rng.uniform(-np.pi, np.pi)
    p = np.array([rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h])
    if rng.random() < 0.5:  # a panel (door, board) behind where the hits land
        pw, ph = rng.uniform(0.15, 0.5) * w, rng.uniform(0.2, 0.6) * h
        rect = p + np.array([[-pw, -ph], [pw, -ph], [pw, ph], [-pw, ph]]) * rng.uniform(0.5, 1.0)
        hc, wc = stage.canvas.shape[:2]
        stage.fill(rect, painted(rng, hc, wc), shade=rng.uniform(-0.3, 0.3))
    return Surface((float(p[0]), float(p[1])), (np.sin(angle), -np.cos(angle)))


def perch(rng: np.random.Generator, stage: Stage) -> Surface:
    w, h = stage.size
    y = rng.uniform(0.4, 0.85) * h
    angle = rng.uniform(-0.15, 0.15)
    mid = np.array([w / 2, y])
    d = np.array([np.cos(angle), np.sin(angle)]) * w
    width = rng.uniform(2, 7)
    stage.line(mid - d, mid + d, random_rgb(rng, 0.1, 0.6), width)
    return _tilted(mid + np.array([np.sin(angle), -np.cos(angle)]) * width / 2, angle, w)


PROPS: dict[str, Callable[[np.random.Generator, Stage], Surface]] = {
    "floor": floor_line,
    "shelf": shelf,
    "table": table,
    "drum": drum,
    "anvil": anvil,
    "wall": wall_edge,
    "frontal": frontal,
}
