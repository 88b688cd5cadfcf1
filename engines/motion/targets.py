"""What the contact head should answer for one window: maps at its output's cells.

    targets(features, k, out_h, out_w) -> Targets (numpy, one window)

A required contact in interval k is a peak of height 1 at its cell, falling off as a Gaussian
of SIGMA cells; u, strength and material are taught where the peak is (the peak cell and its
neighbours: where the head's own peak may land). A contact that is not required (out of
view, too quiet) neither teaches nor is punished: its neighbourhood is left out of the loss. So
is a contact in the interval before or after that lies within EDGE_U of the shared frame, which
the flow cannot place on one side of the frame rather than the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.motion.features import CONTACT_FIELDS, ClipFeatures

CELL_PX = 8  # picture pixels per output cell
SIGMA = 1.0
IGNORE_RADIUS = 2  # cells around a contact that is not taught
EDGE_U = 0.15
COL = {name: i for i, name in enumerate(CONTACT_FIELDS)}


@dataclass(frozen=True)
class Targets:
    heat: np.ndarray  # (h, w) float32 in [0, 1]
    peak: np.ndarray  # (h, w) bool: the contacts' own cells
    near: np.ndarray  # (h, w) bool: where u / strength / material are taught
    u: np.ndarray  # (h, w) float32
    strength: np.ndarray  # (h, w) float32
    material: np.ndarray  # (h, w) int64, -1 where unknown or not taught
    mask: np.ndarray  # (h, w) float32: 0 where the heat is not taught


def targets(features: ClipFeatures, k: int, out_h: int, out_w: int) -> Targets:
    heat = np.zeros((out_h, out_w), np.float32)
    peak = np.zeros((out_h, out_w), bool)
    near = np.zeros((out_h, out_w), bool)
    u = np.zeros((out_h, out_w), np.float32)
    strength = np.zeros((out_h, out_w), np.float32)
    material = np.full((out_h, out_w), -1, np.int64)
    mask = np.ones((out_h, out_w), np.float32)
    ys, xs = np.mgrid[0:out_h, 0:out_w]
    rows = features.contacts
    for c in rows[(rows[:, COL["interval"]] >= k - 1) & (rows[:, COL["interval"]] <= k + 1)]:
        cx = min(out_w - 1, max(0, int(c[COL["x"]] // CELL_PX)))
        cy = min(out_h - 1, max(0, int(c[COL["y"]] // CELL_PX)))
        around = (np.abs(xs - cx) <= IGNORE_RADIUS) & (np.abs(ys - cy) <= IGNORE_RADIUS)
        at, cu = int(c[COL["interval"]]), float(c[COL["u"]])
        if at != k:
            if (at == k - 1 and cu > 1 - EDGE_U) or (at == k + 1 and cu < EDGE_U):
                mask[around] = 0.0
            continue
        if not c[COL["required"]]:
            mask[around] = 0.0
            continue
        g = np.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * SIGMA**2)).astype(np.float32)
        heat = np.maximum(heat, g)
        peak[cy, cx] = True
        close = (np.abs(xs - cx) <= 1) & (np.abs(ys - cy) <= 1)
        near |= close
        u[close] = cu
        strength[close] = c[COL["strength"]]
        material[close] = int(c[COL["material"]])
    mask = np.maximum(mask, heat)  # a taught peak wins over a neighbour's leave-out
    return Targets(heat, peak, near, u, strength, material, mask)
