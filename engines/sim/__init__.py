"""Rigid-body scenes simulated with Bullet and rendered on the CPU, with ground-truth contacts.

sample_scene(rng, kind=..., holdout=...) -> SceneSpec
simulate(spec, duration_s=..., fps=..., width=..., height=...) -> SimClip
"""

from engines.sim.scene import SCENE_KINDS, SceneSpec, sample_scene, scene_from_seed
from engines.sim.simulate import simulate
from engines.sim.types import GROUND, ContactTrack, Impact, SimClip

__all__ = [
    "GROUND",
    "SCENE_KINDS",
    "ContactTrack",
    "Impact",
    "SceneSpec",
    "SimClip",
    "sample_scene",
    "scene_from_seed",
    "simulate",
]
