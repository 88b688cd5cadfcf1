"""The material table shared by the simulator (physics, colour) and the synthesiser (acoustics).

A material's `id` is its index in `MATERIALS`; datasets store ids, so the order is part of the
data format: append new materials, never reorder. Object materials and surface (ground)
materials live in one table so an impact's `other_material` can be either.

Physics values go straight to Bullet, which combines a pair's restitution and friction by
multiplying them; surfaces therefore carry values near 1 for hard floors and the object's value
is roughly the effective coefficient. Bullet's combined rolling friction is
`rolling_a * friction_b + rolling_b * friction_a`, so surfaces keep theirs at zero (carpet
aside). Densities are effective densities of everyday, often hollow, objects rather than of
solid stock (see also `ObjectSpec.mass_kg`): a solid steel box would be tens of dB louder than a
plastic cup, a range no recording of household Foley has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class Acoustics:
    """Parameters of the modal and friction sound models (see `engines.audio`).

    f0_hz: lowest mode of a 10 cm object (objects scale it by 0.1 m / size; surfaces do not).
    t60_s: time for the lowest mode to decay by 60 dB (10 cm object).
    stretch: inharmonicity; mode ratios are raised to the power (1 + stretch).
    contact_ms: contact duration of a ~1 m/s impact, i.e. hardness: a longer contact low-passes
        the excitation (rubber thuds, metal clicks).
    friction_hz: centre of the band of sliding/rolling noise.
    loudness: radiated level relative to the other materials.
    """

    f0_hz: float
    t60_s: float
    stretch: float
    contact_ms: float
    friction_hz: float
    loudness: float


@dataclass(frozen=True)
class Material:
    name: str
    id: int
    surface: bool  # a ground material (textured plane) rather than an object material
    colour: RGB  # linear RGB in [0, 1]; per-clip jitter is added by `jitter_colour`
    specular: float  # 0 matte .. 1 shiny
    restitution: float
    lateral_friction: float
    rolling_friction: float
    density: float  # kg/m^3, effective (see module docstring)
    acoustics: Acoustics


# fmt: off
# Colours are far apart in hue or lightness so a 96x96 model can tell materials from pixels.
#             surface  colour               specular restitution friction rolling  density
_PHYSICS: dict[str, tuple[bool, RGB, float, float, float, float, float]] = {
    "wood":        (False, (0.55, 0.33, 0.14), 0.10, 0.55, 0.55, 0.002,  650.0),
    "metal":       (False, (0.72, 0.76, 0.82), 0.90, 0.60, 0.35, 0.0008, 2500.0),
    "glass":       (False, (0.55, 0.85, 0.85), 0.80, 0.60, 0.30, 0.0008, 2500.0),
    "ceramic":     (False, (0.93, 0.92, 0.86), 0.50, 0.50, 0.45, 0.001,  2000.0),
    "plastic":     (False, (0.85, 0.12, 0.12), 0.30, 0.60, 0.40, 0.0015, 400.0),
    "rubber":      (False, (0.12, 0.12, 0.13), 0.05, 0.85, 0.90, 0.004,  1100.0),
    "stone":       (False, (0.45, 0.42, 0.30), 0.15, 0.40, 0.60, 0.002,  2400.0),
    "wood_floor":  (True,  (0.78, 0.58, 0.36), 0.10, 0.95, 1.00, 0.0,    0.0),
    "concrete":    (True,  (0.60, 0.60, 0.58), 0.05, 0.95, 1.00, 0.0,    0.0),
    "metal_plate": (True,  (0.50, 0.55, 0.62), 0.70, 0.95, 0.80, 0.0,    0.0),
    "carpet":      (True,  (0.42, 0.12, 0.20), 0.00, 0.35, 1.30, 0.01,   0.0),
    "tile":        (True,  (0.85, 0.88, 0.90), 0.40, 0.95, 0.90, 0.0,    0.0),
}
#                          f0_hz   t60_s stretch contact_ms friction_hz loudness
_ACOUSTICS: dict[str, Acoustics] = {
    "wood":        Acoustics(650.0,  0.12, 0.10, 0.4,  900.0,  1.0),
    "metal":       Acoustics(1300.0, 1.4,  0.02, 0.08, 3500.0, 1.1),
    "glass":       Acoustics(1900.0, 0.9,  0.04, 0.1,  4500.0, 0.9),
    "ceramic":     Acoustics(1500.0, 0.45, 0.06, 0.12, 3000.0, 0.9),
    "plastic":     Acoustics(800.0,  0.08, 0.12, 0.3,  1800.0, 0.8),
    "rubber":      Acoustics(260.0,  0.03, 0.2,  2.5,  400.0,  0.6),
    "stone":       Acoustics(1000.0, 0.2,  0.15, 0.15, 2200.0, 1.0),
    "wood_floor":  Acoustics(110.0,  0.15, 0.05, 0.4,  1000.0, 0.5),
    "concrete":    Acoustics(80.0,   0.05, 0.1,  0.1,  2500.0, 0.25),
    "metal_plate": Acoustics(190.0,  1.2,  0.02, 0.08, 3500.0, 0.8),
    "carpet":      Acoustics(60.0,   0.02, 0.1,  4.0,  600.0,  0.05),
    "tile":        Acoustics(420.0,  0.08, 0.08, 0.1,  3000.0, 0.4),
}
# fmt: on

MATERIALS: tuple[Material, ...] = tuple(
    Material(name, i, *physics, acoustics=_ACOUSTICS[name])
    for i, (name, physics) in enumerate(_PHYSICS.items())
)
OBJECT_MATERIALS: tuple[str, ...] = tuple(m.name for m in MATERIALS if not m.surface)
SURFACE_MATERIALS: tuple[str, ...] = tuple(m.name for m in MATERIALS if m.surface)
MATERIAL_NAMES: tuple[str, ...] = tuple(m.name for m in MATERIALS)

_BY_NAME = {m.name: m for m in MATERIALS}


def material(name: str) -> Material:
    """The material called `name`; KeyError names the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown material {name!r}; known: {', '.join(MATERIAL_NAMES)}") from None


def jitter_colour(m: Material, rng: np.random.Generator, amount: float = 0.04) -> RGB:
    """The material's colour with a small per-clip variation that keeps it recognisable."""
    c = np.clip(np.asarray(m.colour) + rng.uniform(-amount, amount, 3), 0.0, 1.0)
    return (float(c[0]), float(c[1]), float(c[2]))
