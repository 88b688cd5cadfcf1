"""When the contacts stream may not fire, however sure its head is: an object the picture's edge
cuts (service.pipeline.contacts.picture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.pipeline.contacts.picture import EDGE_RADII, PictureBox
from service.pipeline.contacts.synth import SHOT_SETTLE_FRAMES, ContactSynth
from service.pipeline.contacts.tier import ContactTier, load_contact_tier

SHIPPED = Path(__file__).resolve().parents[2] / "service" / "models"
TOP, BOTTOM = 20, 88  # the picture's rows in a 192 x 108 frame (letterboxed 2.8:1)


def letterboxed(n: int, width: int = 192, height: int = 108) -> np.ndarray:
    frames = np.zeros((n, height, width, 3), np.uint8)
    frames[:, TOP:BOTTOM] = 40
    return frames


def test_the_picture_is_where_any_frame_was_not_black() -> None:
    box = PictureBox()
    assert box.cuts(np.array([[96.0, 54.0]]), np.array([3.0]))  # no picture seen yet
    box.push(np.zeros((2, 108, 192, 3), np.uint8))  # a black opening
    assert box.bounds[2] < box.bounds[0]
    box.push(letterboxed(1))
    box.push(np.zeros((1, 108, 192, 3), np.uint8))  # a fade to black keeps the box
    assert box.bounds == (0.0, TOP, 192.0, BOTTOM)


def test_an_object_counts_as_cut_once_the_edge_crosses_its_margin() -> None:
    box = PictureBox()
    box.push(letterboxed(1))
    r = 4.0
    inside = TOP + EDGE_RADII * r + 0.1
    assert not box.cuts(np.array([[96.0, inside]]), np.array([r]))
    assert box.cuts(np.array([[96.0, inside - 0.2]]), np.array([r]))
    assert box.cuts(np.array([[191.0, 54.0]]), np.array([r]))  # the right edge too
    # Frames where the object was not found do not count either way.
    assert not box.cuts(np.array([[np.nan, np.nan], [96.0, 54.0]]), np.array([r, r]))


class Scripted:
    """A backend whose localiser sees objects on `path` ((N, 2) for one object, (N, O, 2) for
    several: their (x, y) per frame) and whose head calls every interval a contact."""

    name = "scripted"

    def __init__(self, tier: ContactTier, path: np.ndarray, radius: float) -> None:
        self.tier, self.path, self.radius, self.frame = tier, path, radius, 0

    def run(self, stage: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if stage == "head":
            n = len(inputs["features"])
            return {"probability": np.ones(n, np.float32), "u": np.full(n, 0.5, np.float32)}
        b, m = len(inputs["frames"]), len(self.tier.materials)
        out = {
            "score": np.zeros((b, 6), np.float32),
            "xy": np.zeros((b, 6, 2), np.float32),
            "radius": np.ones((b, 6), np.float32),
            "materials": np.full((b, 6, m), 1 / m, np.float32),
            "size": np.full((b, 6), 0.05, np.float32),
        }
        path = self.path[self.frame : self.frame + b].reshape(b, -1, 2)
        objects = path.shape[1]
        out["score"][:, :objects] = 1.0
        out["xy"][:, :objects] = path
        out["radius"][:, :objects] = self.radius
        self.frame += b
        return out


@pytest.mark.parametrize(("y", "heard"), [(54.0, True), (TOP + 1.0, False)])
def test_an_object_the_edge_cuts_makes_no_sound(y: float, heard: bool) -> None:
    tier = load_contact_tier(SHIPPED, "objects")
    n = 30
    path = np.stack([np.linspace(40.0, 150.0, n), np.full(n, y)], axis=1)
    assert bool(run(tier, path)) is heard


def run(tier: ContactTier, path: np.ndarray) -> list[float]:
    """The event times a stream fires for objects on `path`, at 30 fps."""
    n = len(path)
    synth = ContactSynth(tier, Scripted(tier, path, radius=4.0))
    times = np.arange(n) / 30.0
    for k in range(0, n, 5):
        synth.push(times[k : k + 5], letterboxed(5))
    list(synth.finish(n / 30.0))
    return [f.event.time_s for f in synth.fired]


def test_nothing_sounds_before_a_new_shot_shows_an_approach() -> None:
    """A head that calls every interval a contact: still nothing sounds in the first frames of
    the shot after a cut, where no object has an approach yet; later it does. The stream's own
    first frames may sound (an object launched as the clip begins is heard)."""
    tier = load_contact_tier(SHIPPED, "objects")
    n, cut = 40, 20
    path = np.stack([np.linspace(40.0, 150.0, n), np.full(n, 54.0)], axis=1)
    frames = letterboxed(n)
    frames[cut:, TOP:BOTTOM] = 200  # another shot: every colour changes
    synth = ContactSynth(tier, Scripted(tier, path, radius=4.0))
    times = np.arange(n) / 30.0
    for k in range(0, n, 5):
        synth.push(times[k : k + 5], frames[k : k + 5])
    list(synth.finish(n / 30.0))
    events = np.array([f.event.time_s for f in synth.fired])
    settle = SHOT_SETTLE_FRAMES - 1
    assert (events < times[settle]).any()
    shot = (events >= times[cut]) & (events < times[cut + settle])
    assert not shot.any(), events[shot]
    assert ((events >= times[cut + settle]) & (events < times[cut + 10])).any()
