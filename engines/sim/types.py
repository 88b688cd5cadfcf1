"""Ground truth of a simulated clip: what the synthesiser and the dataset consume."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from engines.sim.scene import SceneSpec

GROUND = -1  # `other_id` of contacts with the floor


@dataclass(frozen=True)
class Impact:
    """A new contact. For an object-object collision there is one Impact per object, each with
    the same time and impulse, so each object's own modes are excited once.

    time_s: when the surfaces met, refined below the physics step from the gap and approach speed.
    impulse_ns: normal impulse over the contact's first few ms (N*s); > 0.
    speed_mps: normal approach speed just before contact.
    """

    time_s: float
    impulse_ns: float
    speed_mps: float
    object_id: int
    other_id: int  # GROUND or the other object's index
    material: str
    other_material: str
    size_m: float
    shape: str


@dataclass(frozen=True)
class ContactTrack:
    """Continuous contact of one pair at physics rate (only pairs that ever touch).

    slide_speed: tangential relative speed at the contact point (m/s), 0 when apart.
    roll_speed: |relative angular velocity about tangent axes| * radius while touching and not
        sliding, for round objects (boxes tumble instead); 0 otherwise.
    normal_force: N, 0 when apart.
    """

    object_id: int
    other_id: int
    material: str
    other_material: str
    size_m: float
    shape: str
    time_s: np.ndarray  # (S+1,) float64
    slide_speed: np.ndarray  # (S+1,) float64
    roll_speed: np.ndarray  # (S+1,) float64
    normal_force: np.ndarray  # (S+1,) float64


@dataclass
class SimClip:
    """A rendered, simulated clip. Frame k shows the scene at `times_s[k] = k / fps`; the audio
    timeline starts at frame 0 and lasts `duration_s`."""

    spec: SceneSpec
    frames: np.ndarray  # (N, height, width, 3) uint8 RGB
    times_s: np.ndarray  # (N,) float64
    fps: Fraction
    duration_s: float
    physics_hz: int
    impacts: list[Impact]
    tracks: list[ContactTrack]
    # (N, O, 2) float32: each object's centre of mass in frame k, in normalised device
    # coordinates (x right, y up, [-1, 1] across the frame); NaN behind the camera.
    screen_xy: np.ndarray

    @property
    def width(self) -> int:
        return int(self.frames.shape[2])

    @property
    def height(self) -> int:
        return int(self.frames.shape[1])
