"""The object-level encoder's path with the saved weights: a filmed object is followed through
the clip, and the events it fires lie inside the clip, in order."""

from __future__ import annotations

import numpy as np
import torch

from engines.eval.objects import OBJECTS, decode, fired, tracks_of
from engines.eval.scenes import scene_clip
from engines.models.localiser import Localiser
from engines.sim.materials import OBJECT_MATERIALS
from engines.tracks.head import HeadDetector, load_head


def test_a_dropped_object_is_tracked_and_its_events_are_in_the_clip(tmp_path) -> None:
    # Seed 26: the object stays in view the whole clip.
    clip = scene_clip(
        26, "25", tmp_path, holdout=False, duration_s=2.0, size=(320, 180), kind="drop"
    )
    localiser = Localiser(materials=len(OBJECT_MATERIALS))
    localiser.load_state_dict(torch.load(OBJECTS / "localiser.pt")["model"])
    localiser.eval()
    times, rgb = decode(clip.video)
    assert len(times) == 50 and rgb.shape[1:] == (108, 192, 3)
    longest = max(track.seen for track in tracks_of(localiser, times, rgb))
    assert longest == 50
    events = fired(
        localiser, HeadDetector(load_head(OBJECTS / "contact_head.pt").eval()), clip.video
    )
    assert np.all(np.diff(events) > 0) and np.all((events >= 0) & (events < 2.0))
