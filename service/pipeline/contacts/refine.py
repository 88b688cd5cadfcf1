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

All of a frame's objects are registered at once (one patch size, each object's own disc), so
the cost per frame hardly grows with the number of objects.
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
    """image (C, H, W) sampled at (xs, ys) pixel centres, any shape S -> (C, *S); clamped at
    the borders."""
    c, h, w = image.shape
    xs = np.clip(xs, 0.0, w - 1.0)
    ys = np.clip(ys, 0.0, h - 1.0)
    x0 = np.minimum(xs.astype(np.int64), w - 2)
    y0 = np.minimum(ys.astype(np.int64), h - 2)
    fx, fy = (xs - x0).astype(np.float32), (ys - y0).astype(np.float32)
    flat, at = image.reshape(c, h * w), y0 * w + x0
    a, b = np.take(flat, at, axis=1), np.take(flat, at + 1, axis=1)
    top = a + (b - a) * fx
    a, b = np.take(flat, at + w, axis=1), np.take(flat, at + w + 1, axis=1)
    sampled: np.ndarray = top + (a + (b - a) * fx - top) * fy
    return sampled


def displacements(
    previous: np.ndarray,
    current: np.ndarray,
    at: np.ndarray,
    radius: np.ndarray,
    guess: np.ndarray,
) -> np.ndarray:
    """How far each object at `at` (N, 2) px of `previous` (C, H, W), of `radius` (N,) px,
    moved in `current`, starting from `guess` (N, 2) -> (N, 2); NaN where the patch has no
    texture to register (a flat patch)."""
    at, radius = np.asarray(at, np.float64), np.asarray(radius, np.float64)
    reach = math.ceil(max(2.0, MASK_RADII * float(radius.max()) + 0.5))
    g = np.arange(-reach, reach + 1, dtype=np.float64)
    gx, gy = np.meshgrid(g, g)
    weight = np.clip(MASK_RADII * radius[:, None, None] - np.hypot(gx, gy) + 0.5, 0.0, 1.0)
    weight = weight.astype(np.float32)
    xs, ys = at[:, 0, None, None] + gx, at[:, 1, None, None] + gy  # (N, G, G)
    template = bilinear(previous, xs, ys)  # (C, N, G, G)
    ty, tx = np.gradient(template, axis=(2, 3))
    wx, wy = weight * tx, weight * ty
    sxx, sxy, syy = (np.sum(p, axis=(0, 2, 3)) for p in (wx * tx, wx * ty, wy * ty))
    det = sxx * syy - sxy * sxy
    flat = det <= 1e-9
    det = np.where(flat, 1.0, det)
    d = np.array(guess, np.float64)
    for _ in range(ITERATIONS):
        error = bilinear(current, xs + d[:, 0, None, None], ys + d[:, 1, None, None]) - template
        bx, by = np.sum(wx * error, axis=(0, 2, 3)), np.sum(wy * error, axis=(0, 2, 3))
        step = np.stack([syy * bx - sxy * by, sxx * by - sxy * bx], axis=1) / det[:, None]
        step = np.clip(step, -2.0, 2.0)
        d -= step
        if np.abs(step).max() < MIN_STEP_PX:
            break
    d[flat] = np.nan
    return d


def refined(
    previous: np.ndarray,
    current: np.ndarray,
    before: np.ndarray,
    detected: np.ndarray,
    radius: np.ndarray,
) -> np.ndarray:
    """The objects' positions (N, 2) in `current`: their detections, steadied by registering
    them from their positions `before` (N, 2) in `previous`."""
    before, detected = np.asarray(before, np.float64), np.asarray(detected, np.float64)
    registered = before + displacements(previous, current, before, radius, detected - before)
    distance = np.linalg.norm(registered - detected, axis=1)
    trusted = np.isfinite(distance) & (distance <= LOST_PX)
    return np.where(
        trusted[:, None], detected + REGISTERED_WEIGHT * (registered - detected), detected
    )


def steady(tracks: list[Track], previous: np.ndarray, current: np.ndarray) -> None:
    """Each track found in this frame (`current`, C x H x W) and in the frame before
    (`previous`) gets its newest position refined in place."""
    both = [
        t
        for t in tracks
        if len(t.xy) >= 2 and np.isfinite(t.xy[-2]).all() and np.isfinite(t.xy[-1]).all()
    ]
    if not both:
        return
    positions = refined(
        previous,
        current,
        np.stack([t.xy[-2] for t in both]),
        np.stack([t.xy[-1] for t in both]),
        np.array([t.radius[-2] for t in both]),
    )
    for track, xy in zip(both, positions, strict=True):
        track.xy[-1] = xy
