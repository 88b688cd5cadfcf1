"""Hand-built scenes for the engine tests (sampled scenes are too varied to pin numbers on)."""

from __future__ import annotations

from engines.sim.camera import CameraSpec
from engines.sim.scene import ObjectSpec, SceneSpec

CAMERA = CameraSpec(
    target=(0.0, 0.0, 0.1), distance=0.8, yaw_deg=30.0, pitch_deg=-20.0, fov_deg=50.0
)


def drop_scene(
    height_m: float = 0.5,
    *,
    radius_m: float = 0.04,
    material: str = "wood",
    surface: str = "wood_floor",
    release_s: float = 0.0,
) -> SceneSpec:
    """A sphere whose lowest point is `height_m` above the floor, at rest, let go at release_s."""
    ball = ObjectSpec(
        shape="sphere",
        material=material,
        half_extents=(radius_m,) * 3,
        colour=(0.5, 0.3, 0.1),
        position=(0.0, 0.0, height_m + radius_m),
        orientation=(0.0, 0.0, 0.0, 1.0),
        linear_velocity=(0.0, 0.0, 0.0),
        angular_velocity=(0.0, 0.0, 0.0),
        release_s=release_s,
    )
    return SceneSpec(
        kind="drop",
        holdout=False,
        objects=(ball,),
        surface=surface,
        surface_colour=(0.7, 0.5, 0.3),
        camera=CAMERA,
        light_direction=(0.3, 0.3, 0.9),
        texture_seed=0,
    )


def launch_scene(
    shape: str, speed_mps: float = 1.0, *, material: str = "wood", surface: str = "wood_floor"
) -> SceneSpec:
    """A 6 cm sphere (rolling from the start) or box (sliding) launched along x at t = 0."""
    h = 0.03
    spin = (0.0, speed_mps / h, 0.0) if shape == "sphere" else (0.0, 0.0, 0.0)
    half = (h, h, h) if shape == "sphere" else (h, 0.025, 0.02)
    obj = ObjectSpec(
        shape=shape,
        material=material,
        half_extents=half,
        colour=(0.5, 0.3, 0.1),
        position=(0.0, 0.0, half[2]),
        orientation=(0.0, 0.0, 0.0, 1.0),
        linear_velocity=(speed_mps, 0.0, 0.0),
        angular_velocity=spin,
    )
    return SceneSpec(
        kind="roll" if shape == "sphere" else "slide",
        holdout=False,
        objects=(obj,),
        surface=surface,
        surface_colour=(0.7, 0.5, 0.3),
        camera=CAMERA,
        light_direction=(0.3, 0.3, 0.9),
        texture_seed=0,
    )
