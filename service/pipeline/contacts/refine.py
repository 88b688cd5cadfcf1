"""Sub-pixel motion of a tracked object from the pictures themselves, between two frames.

The localiser finds each object on its own in every frame, so its position errors are
independent from frame to frame and the velocity the contact head reads carries both frames'
errors. The same object in two consecutive frames is almost the same picture moved, though:
registering the previous frame's patch (a disc of the object's radius) onto the new frame gives
the displacement far more precisely (Lucas-Kanade, inverse compositional, translation only).
The tracked position is then the localiser's, pulled towards the previous position plus that
displacement by REGISTERED_WEIGHT: the localiser keeps it anchored (registration errors would
otherwise add up), registration steadies its frame-to-frame change.

A registration that moves further than LOST_PX from the localiser's detection has followed
something else (an overlapping object, the floor): the detection stands.
"""

from __future__ import annotations

import math

import numpy as np

from service.pipeline.contacts.tracking import Track

REGISTERED_WEIGHT = 0.7
MASK_RADII = 1.2  # the patch: a disc of this many radii; its edge carries most of the signal
LOST_PX = 2.5
ITERATIONS = 8
MIN_STEP_PX = 0.01


def bilinear(image: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """image (C, H, W) sampled at (xs, ys) pixel centres -> (C, n); clamped at the borders."""
    _, h, w = image.shape
    xs = np.clip(xs, 0.0, w - 1.0)
    ys = np.clip(ys, 0.0, h - 1.0)
    x0 = np.minimum(xs.astype(np.int64), w - 2)
    y0 = np.minimum(ys.astype(np.int64), h - 2)
    fx, fy = xs - x0, ys - y0
    a, b = image[:, y0, x0], image[:, y0, x0 + 1]
    c, d = image[:, y0 + 1, x0], image[:, y0 + 1, x0 + 1]
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def displacement(
    previous: np.ndarray, current: np.ndarray, at: np.ndarray, radius: float, guess: np.ndarray
) -> np.ndarray | None:
    """How far the object at `at` (px) of `previous` (C, H, W) moved in `current`, starting
    from `guess`; None where the patch has no texture to register (a flat patch)."""
    reach = math.ceil(max(2.0, MASK_RADII * radius + 0.5))
    g = np.arange(-reach, reach + 1, dtype=np.float64)
    gx, gy = np.meshgrid(g, g)
    weight = np.clip(MASK_RADII * radius - np.hypot(gx, gy) + 0.5, 0.0, 1.0)
    xs, ys = at[0] + gx, at[1] + gy
    template = bilinear(previous, xs.ravel(), ys.ravel()).reshape(-1, *gx.shape)
    ty, tx = np.gradient(template, axis=(1, 2))
    hessian = np.array(
        [
            [np.sum(weight * tx * tx), np.sum(weight * tx * ty)],
            [np.sum(weight * tx * ty), np.sum(weight * ty * ty)],
        ]
    )
    if np.linalg.det(hessian) <= 1e-9:
        return None
    inverse = np.linalg.inv(hessian)
    wx, wy = (weight * tx).reshape(len(tx), -1), (weight * ty).reshape(len(ty), -1)
    template = template.reshape(len(template), -1)
    d = np.asarray(guess, np.float64).copy()
    for _ in range(ITERATIONS):
        error = bilinear(current, xs.ravel() + d[0], ys.ravel() + d[1]) - template
        step = inverse @ np.array([np.sum(wx * error), np.sum(wy * error)])
        step = np.clip(step, -2.0, 2.0)
        d -= step
        if np.abs(step).max() < MIN_STEP_PX:
            break
    return d


def refined(
    previous: np.ndarray,
    current: np.ndarray,
    before: np.ndarray,
    detected: np.ndarray,
    radius: float,
) -> np.ndarray:
    """The object's position in `current`: its detection, steadied by registering it from its
    position `before` in `previous`."""
    d = displacement(previous, current, before, radius, detected - before)
    if d is None:
        return detected
    registered = before + d
    if not np.all(np.isfinite(registered)) or np.linalg.norm(registered - detected) > LOST_PX:
        return detected
    return detected + REGISTERED_WEIGHT * (registered - detected)


def steady(tracks: list[Track], previous: np.ndarray, current: np.ndarray) -> None:
    """Each track found in this frame (`current`, C x H x W) and in the frame before
    (`previous`) gets its newest position refined in place."""
    for track in tracks:
        if len(track.xy) < 2:
            continue
        before, detected = track.xy[-2], track.xy[-1]
        if np.isfinite(before).all() and np.isfinite(detected).all():
            track.xy[-1] = refined(previous, current, before, detected, track.radius[-2])
