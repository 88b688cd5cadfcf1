"""Shot cuts: found between two scenes, never inside one, whether the camera moves or not."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import av
import numpy as np
import pytest

from service.media.frames import FrameScaler, rgb_as_decoded
from service.pipeline.contacts.cuts import (
    BINS,
    MIN_SHOT_S,
    THUMBNAIL,
    CutDetector,
    histogram,
    thumbnail,
)

SCALER = FrameScaler(192, 108)


def _model_frames(seed: int, kind: str, *, moving: bool = False) -> list[np.ndarray]:
    from engines.eval.scenes import film
    from engines.sim import scene_from_seed

    spec = scene_from_seed(seed, kind=kind)
    if moving:
        camera = replace(spec.camera, yaw_rate_dps=15.0, distance_rate_mps=0.1)
        spec = replace(spec, camera=camera)
    clip = film(spec, seed, "24", 1.0, (320, 180), None)
    return [rgb_as_decoded(f, SCALER) for f in clip.frames]


@pytest.mark.parametrize("seeds", [(1, 2), (3, 4), (5, 6)])
def test_a_cut_between_two_scenes_is_found_once(seeds: tuple[int, int]) -> None:
    frames = _model_frames(seeds[0], "drop") + _model_frames(seeds[1], "multi")
    detector = CutDetector()
    cuts = [k for k, f in enumerate(frames) if detector.push(f, k / 24)]
    assert cuts == [24]


def test_a_moving_camera_and_moving_objects_are_no_cut() -> None:
    detector = CutDetector()
    frames = _model_frames(7, "static", moving=True) + _model_frames(8, "multi")[:1]
    assert not any(detector.push(f, k / 24) for k, f in enumerate(frames[:-1]))


def test_real_footage_of_gliding_cameras_has_its_one_cut() -> None:
    """Two night shots of towers, each filmed by a gliding camera, cut at frame 116."""
    from engines.eval.footage import DEFAULT_FOOTAGE

    detector = CutDetector()
    with av.open(str(DEFAULT_FOOTAGE)) as container:
        found = [detector.push(SCALER(f), float(f.time)) for f in container.decode(video=0)]
    assert len(found) > 150 and [k for k, cut in enumerate(found) if cut] == [116]


@pytest.mark.parametrize("shape", [(108, 192), (100, 190)])
def test_the_cues_are_block_means_and_a_histogram_at_any_picture_size(shape) -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (*shape, 3), dtype=np.uint8)
    grey = rgb.astype(np.float64).mean(axis=-1) / 255.0
    rows = np.linspace(0, shape[0], THUMBNAIL[0] + 1).astype(int)
    cols = np.linspace(0, shape[1], THUMBNAIL[1] + 1).astype(int)
    expected = [
        [grey[a:b, c:d].mean() for c, d in itertools.pairwise(cols)]
        for a, b in itertools.pairwise(rows)
    ]
    np.testing.assert_allclose(thumbnail(rgb), expected, atol=1e-12)
    counts = histogram(rgb)
    assert counts.shape == (BINS**3,) and counts.sum() == pytest.approx(1.0)
    black = np.zeros((*shape, 3), np.uint8)
    assert histogram(black)[0] == 1.0 and histogram(black + 255)[-1] == 1.0


def test_a_run_of_large_changes_is_one_cut_at_most() -> None:
    """Frames that each change most of the picture (a large object tumbling by the camera):
    one cut at the run's start at most, then none until MIN_SHOT_S has passed."""
    palette = np.array([[250, 0, 0], [0, 250, 0], [0, 0, 250], [250, 250, 250]], np.uint8)
    frames = np.broadcast_to(palette[np.arange(12) % 4, None, None, :], (12, 108, 192, 3))
    detector = CutDetector()
    cuts = [k for k, f in enumerate(frames) if detector.push(f, k / 30)]
    assert cuts[:2] == [1, 1 + math.ceil(MIN_SHOT_S * 30)]
