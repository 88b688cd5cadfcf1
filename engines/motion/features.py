"""Generated clips -> what the contact head trains on, through the service's own preprocessing.

    clip_features(frames, times_s, cuts, contacts) -> ClipFeatures

Every frame goes the way a decoded one does (yuv420p, scaled and letterboxed into the tier's
picture by service.media.frames), then through service.pipeline.motion (flow, camera motion
removed, the head's scaled maps), so training and serving read the same numbers.

Labels: each contact belongs to the interval [t_k, t_k+1) it happens in, at its place in the
picture (letterboxed pixels) and its fraction u = (t - t_k) / (t_k+1 - t_k) of the interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.sim.materials import OBJECT_MATERIALS
from service.media.frames import FrameScaler, rgb_as_decoded
from service.pipeline.motion.flow import MotionField
from service.pipeline.motion.window import AHEAD, BACK, stack, window

WIDTH, HEIGHT = 320, 180
MATERIALS = OBJECT_MATERIALS  # the head's material order: the renderer's voices' order
# contacts: one row each of these
CONTACT_FIELDS = ("interval", "x", "y", "u", "strength", "material", "required")


@dataclass(frozen=True)
class Contact:
    time_s: float
    xy: tuple[float, float]  # pixels of the source frames
    strength: float  # log scale, larger is louder
    material: str | None
    required: bool


@dataclass(frozen=True)
class ClipFeatures:
    x: np.ndarray  # (I, CHANNELS, h, w) float16: interval i is frames i -> i + 1
    valid: np.ndarray  # (I,) bool: False across a shot cut (its maps are zeros)
    shot: np.ndarray  # (I,) int: which shot each interval belongs to
    start_s: np.ndarray  # (I,) float64
    end_s: np.ndarray  # (I,) float64
    contacts: np.ndarray  # (C, len(CONTACT_FIELDS)) float64, picture pixels

    def save(self, path: Path) -> None:
        """`path` (.npz) holds the small arrays; the maps go beside it as .x.npy, which `load`
        maps from disk rather than reads: a training set is larger than memory."""
        np.save(maps_path(path), self.x)
        small = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "x"}
        np.savez(path, **small)

    @classmethod
    def load(cls, path: Path) -> ClipFeatures:
        with np.load(path) as z:
            small = {k: z[k] for k in cls.__dataclass_fields__ if k != "x"}
        return cls(x=np.load(maps_path(path), mmap_mode="r"), **small)


def maps_path(path: Path) -> Path:
    return Path(path).with_suffix(".x.npy")


def clip_window(clip: ClipFeatures, k: int) -> np.ndarray:
    """Interval k's window as the service's detector builds it: intervals of another shot, or
    across a cut, are not seen."""
    n = len(clip.valid)
    seen = [
        clip.x[j] if 0 <= j < n and clip.valid[j] and clip.shot[j] == clip.shot[k] else None
        for j in range(k - BACK, k + AHEAD + 1)
    ]
    return window(seen, BACK).astype(np.float32)


def letterbox_map(src_w: int, src_h: int) -> tuple[float, float, float]:
    """(scale, left, top): where a source pixel lands in the letterboxed picture."""
    aspect = src_w / src_h
    if aspect >= WIDTH / HEIGHT:
        w, h = WIDTH, max(1, min(HEIGHT, round(WIDTH / aspect)))
    else:
        w, h = max(1, min(WIDTH, round(HEIGHT * aspect))), HEIGHT
    return w / src_w, (WIDTH - w) // 2, (HEIGHT - h) // 2


def clip_features(
    frames: np.ndarray,
    times_s: np.ndarray,
    cuts: tuple[int, ...],
    contacts: list[Contact],
) -> ClipFeatures:
    """frames (N, H, W, 3) uint8 at times_s (N,), shots starting at `cuts`."""
    scaler = FrameScaler(WIDTH, HEIGHT, letterbox=True)
    field = MotionField(WIDTH, HEIGHT)
    cut_set = set(cuts)
    stacks, valid, shot = [], [], []
    current = 0
    for k, (t, rgb) in enumerate(zip(times_s, frames, strict=True)):
        picture = rgb_as_decoded(rgb, scaler)
        interval = field.push(float(t), picture, cut=k in cut_set)
        if k in cut_set:
            current += 1
        if k == 0:
            continue
        if interval is None:
            stacks.append(None)
        else:
            stacks.append(stack(interval))
        valid.append(interval is not None)
        shot.append(current)
    shape = next(s for s in stacks if s is not None).shape
    x = np.stack([np.zeros(shape, np.float32) if s is None else s for s in stacks])
    scale, left, top = letterbox_map(frames.shape[2], frames.shape[1])
    rows = []
    for c in contacts:
        k = int(np.searchsorted(times_s, c.time_s, side="right")) - 1
        if k < 0 or k >= len(times_s) - 1 or not valid[k]:
            continue
        u = (c.time_s - times_s[k]) / (times_s[k + 1] - times_s[k])
        material = MATERIALS.index(c.material) if c.material in MATERIALS else -1
        px, py = left + c.xy[0] * scale, top + c.xy[1] * scale
        rows.append((k, px, py, u, c.strength, material, float(c.required)))
    return ClipFeatures(
        x=x.astype(np.float16),
        valid=np.array(valid),
        shot=np.array(shot),
        start_s=np.asarray(times_s[:-1], np.float64),
        end_s=np.asarray(times_s[1:], np.float64),
        contacts=np.array(rows, np.float64).reshape(-1, len(CONTACT_FIELDS)),
    )
