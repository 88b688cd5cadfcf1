"""The camera of a shot: a 2-D similarity (pan, zoom, roll) plus handheld shake, over time.

picture = zoom * R(roll) @ (scene - centre - pan) + centre, with `centre` the picture centre.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.sim.sprites.kinematics import Track, rot

Wobble = tuple[float, float, float]  # (amplitude, hz, phase)


@dataclass(frozen=True)
class Camera:
    centre: tuple[float, float]
    pan_x: Track
    pan_y: Track
    zoom: Track
    roll: Track
    shake_x: tuple[Wobble, ...] = ()
    shake_y: tuple[Wobble, ...] = ()
    shake_roll: tuple[Wobble, ...] = ()

    @property
    def moving(self) -> bool:
        tracks = (self.pan_x, self.pan_y, self.zoom, self.roll)
        return bool(self.shake_x or self.shake_y or not all(t.constant for t in tracks))

    def matrices(self, t: np.ndarray) -> np.ndarray:
        """(T, 2, 3) affine maps from scene to picture px."""
        t = np.asarray(t, np.float64)
        ox = self.pan_x(t) + _waves(self.shake_x, t)
        oy = self.pan_y(t) + _waves(self.shake_y, t)
        a = self.zoom(t)[:, None, None] * rot(self.roll(t) + _waves(self.shake_roll, t))
        c = np.asarray(self.centre)
        shift = c - np.einsum("tij,tj->ti", a, c + np.stack([ox, oy], axis=1))
        return np.concatenate([a, shift[:, :, None]], axis=2)

    def to_picture(self, xy: np.ndarray, t: float) -> np.ndarray:
        m = self.matrices(np.array([t]))[0]
        return np.asarray(xy, np.float64) @ m[:, :2].T + m[:, 2]

    def view_bounds(self, t: np.ndarray, size: tuple[int, int]) -> tuple[float, ...]:
        """Scene box (x0, y0, x1, y1) that the picture shows at any of the times t."""
        w, h = size
        corners = np.array([[-1, -1], [w, -1], [-1, h], [w, h]], np.float64)
        pts = []
        for m in self.matrices(t):
            inv = np.linalg.inv(m[:, :2])
            pts.append((corners - m[:, 2]) @ inv.T)
        allp = np.concatenate(pts)
        return (*allp.min(axis=0), *allp.max(axis=0))


def _waves(terms: tuple[Wobble, ...], t: np.ndarray) -> np.ndarray:
    out = np.zeros_like(t)
    for amp, hz, ph in terms:
        out = out + amp * np.sin(2 * np.pi * hz * t + ph)
    return out


def still_camera(size: tuple[int, int]) -> Camera:
    c = (size[0] / 2 - 0.5, size[1] / 2 - 0.5)
    return Camera(c, Track(0, 0), Track(0, 0), Track(0, 1), Track(0, 0))


def sample_camera(
    rng: np.random.Generator, duration: float, size: tuple[int, int], pan_vx: float | None = None
) -> Camera:
    """A moving camera: some mix of pan, handheld shake, zoom and a slow roll. `pan_vx` makes it
    follow something moving at that speed (px/s)."""
    w, h = size
    c = (w / 2 - 0.5, h / 2 - 0.5)
    styles = set(rng.choice(["pan", "shake", "zoom", "roll"], size=rng.integers(1, 3)))
    if pan_vx is not None:
        styles.add("pan")
    pan_x, pan_y, zoom, roll = Track(0, 0), Track(0, 0), Track(0, 1), Track(0, 0)
    if "pan" in styles:
        if pan_vx is not None:
            pan_x = Track(0, 0).to(duration, pan_vx * duration, "lin")
        else:
            dist = rng.uniform(0.1, 0.8) * w * rng.choice([-1, 1]) * duration / 4
            ease = "smooth" if rng.random() < 0.5 else "lin"
            pan_x = Track(0, 0).to(duration, dist, ease)
            pan_y = Track(0, 0).to(duration, rng.uniform(-0.15, 0.15) * dist, ease)
    if "zoom" in styles:
        z1 = rng.uniform(1.08, 1.4)
        z0, z1 = (1.0, z1) if rng.random() < 0.6 else (z1, 1.0)
        t0, t1 = sorted(rng.uniform(0, duration, 2))
        zoom = Track(0, z0).hold(t0).to(max(t1, t0 + 0.3), z1, "smooth")
    if "roll" in styles:
        roll = Track(0, 0).to(duration, rng.uniform(-0.06, 0.06), "smooth")
    shake: list[tuple[Wobble, ...]] = [(), (), ()]
    if "shake" in styles:
        amp = rng.uniform(0.3, 5.0) * max(w, h) / 320
        for k, scale in enumerate((amp, amp, amp * 0.003)):
            shake[k] = tuple(
                (
                    scale * rng.uniform(0.2, 1.0) / (j + 1),
                    rng.uniform(0.4, 7.0),
                    rng.uniform(0, 6.3),
                )
                for j in range(3)
            )
    return Camera(c, pan_x, pan_y, zoom, roll, *shake)
