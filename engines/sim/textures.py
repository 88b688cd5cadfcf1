"""Procedural floor textures, one pattern per surface material, written as PNG for Bullet.

Bullet's `loadTexture` reads image files only (no arrays) and this environment has no imaging
library, hence the minimal PNG writer. Patterns are multiplied by the surface colour so the
material stays recognisable by colour; the pattern gives camera motion something to track.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

SIZE = 128  # texels per texture repeat (one repeat covers TEXTURE_REPEAT_M of floor)
TEXTURE_REPEAT_M = 0.5


def floor_texture(surface: str, colour: tuple[float, float, float], seed: int) -> np.ndarray:
    """(SIZE, SIZE, 3) uint8: the surface's pattern tinted by `colour`."""
    rng = np.random.default_rng(seed)
    pattern = _PATTERNS[surface](rng)
    rgb = np.clip(pattern[..., None] * np.asarray(colour)[None, None, :], 0.0, 1.0)
    return (rgb * 255.0 + 0.5).astype(np.uint8)


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Write (H, W, 3) uint8 as an 8-bit RGB PNG."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + np.ascontiguousarray(rgb[y]).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _smooth_noise(rng: np.random.Generator, cells: int) -> np.ndarray:
    """Tileable value noise in [0, 1]: a cells x cells grid upsampled bilinearly with wrap."""
    grid = rng.random((cells, cells))
    x = np.arange(SIZE) * cells / SIZE
    i0 = np.floor(x).astype(int)
    f = x - i0
    i1 = (i0 + 1) % cells
    rows = grid[i0] * (1 - f)[:, None] + grid[i1] * f[:, None]
    return rows[:, i0] * (1 - f)[None, :] + rows[:, i1] * f[None, :]


def _wood(rng: np.random.Generator) -> np.ndarray:
    plank = SIZE // 8
    shade = np.repeat(rng.uniform(0.8, 1.1, 8), plank)[:, None]
    grain = 1.0 + 0.08 * (rng.random((SIZE, 1)) - 0.5) + 0.06 * (rng.random((SIZE, SIZE)) - 0.5)
    out = shade * grain * np.ones((SIZE, SIZE))
    out[::plank] *= 0.55  # seams
    return out


def _concrete(rng: np.random.Generator) -> np.ndarray:
    return 0.85 + 0.2 * _smooth_noise(rng, 8) + 0.1 * (rng.random((SIZE, SIZE)) - 0.5)


def _metal(rng: np.random.Generator) -> np.ndarray:
    brushed = 1.0 + 0.12 * (rng.random((1, SIZE)) - 0.5) + 0.05 * (rng.random((SIZE, SIZE)) - 0.5)
    out = brushed * np.ones((SIZE, SIZE))
    step = SIZE // 4  # rivets
    for y in range(step // 2, SIZE, step):
        for x in range(step // 2, SIZE, step):
            out[y - 1 : y + 2, x - 1 : x + 2] = 1.35
    return out


def _carpet(rng: np.random.Generator) -> np.ndarray:
    return 0.9 + 0.25 * (rng.random((SIZE, SIZE)) - 0.5) + 0.1 * _smooth_noise(rng, 16)


def _tile(rng: np.random.Generator) -> np.ndarray:
    tile = SIZE // 4
    out = np.repeat(np.repeat(rng.uniform(0.93, 1.05, (4, 4)), tile, 0), tile, 1)
    out = out + 0.04 * (rng.random((SIZE, SIZE)) - 0.5)
    for k in range(0, SIZE, tile):  # grout
        out[k : k + 2] = 0.6
        out[:, k : k + 2] = 0.6
    return out


_PATTERNS = {
    "wood_floor": _wood,
    "concrete": _concrete,
    "metal_plate": _metal,
    "carpet": _carpet,
    "tile": _tile,
}
