"""The runner contract, for every shipped tier kind: a file render and a live stream are the same
runner, and a long gap between two frames comes out a bounded piece at a time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from service.pipeline.preprocess import MAX_CHUNK_FRAMES
from service.pipeline.runner import create_runner, gather
from service.pipeline.streaming import StageTimer

ENGINES = ["real_engine", "frames_engine", "objects_engine"]


def _frames(engine, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    tier = engine.tier
    # A bright square falling on a dark picture, then resting: motion to fire on.
    rgb = np.full((n, tier.height, tier.width, 3), 20, np.uint8)
    for k in range(n):
        y = min(int(2.5 * k), tier.height - 12)
        rgb[k, y : y + 12, 40:52] = 230
    rgb += rng.integers(0, 4, rgb.shape, dtype=np.uint8)
    return np.arange(n) / 30.0, rgb


def _largest_piece(engine) -> int:
    tier = engine.tier
    if tier.model_fps is None:  # events placed on their samples: a second at most
        return tier.sample_rate
    return MAX_CHUNK_FRAMES * tier.sample_rate // tier.model_fps


@pytest.mark.parametrize("name", ENGINES)
def test_a_long_gap_comes_out_in_bounded_pieces(name: str, request: pytest.FixtureRequest) -> None:
    """A still frame held for ten minutes is ten minutes of audio, never held at once."""
    engine = request.getfixturevalue(name)
    runner = create_runner(engine.tier, engine.backend)
    stream = runner.open()
    pts, rgb = _frames(engine, 2)
    gather(runner.push([stream], [(pts[:1], rgb[:1])]), 1)
    pieces = [out.audio for (out,) in runner.push([stream], [(pts[1:] + 600.0, rgb[1:])])]
    pieces += [out.audio for (out,) in runner.finish([stream], [601.0])]
    assert max(len(p) for p in pieces) <= _largest_piece(engine)
    assert sum(len(p) for p in pieces) == pytest.approx(601.0 * engine.tier.sample_rate, abs=2)


@pytest.mark.parametrize("name", ENGINES)
def test_a_file_and_a_live_stream_are_one_runner(name: str, request: pytest.FixtureRequest) -> None:
    """One push of the whole clip (a file) and a frame a push (live) give the same track, the
    same contacts, and onsets on the samples where those contacts start."""
    engine = request.getfixturevalue(name)
    tier = engine.tier
    pts, rgb = _frames(engine, 45, seed=1)
    tracks, markers, onsets = [], [], []
    for pushes in ([45], [1] * 45):
        runner = create_runner(tier, engine.backend, timer=StageTimer())
        stream = runner.open()
        edges = np.cumsum([0, *pushes])
        out = [
            gather(runner.push([stream], [(pts[a:b], rgb[a:b])]), 1)[0]
            for a, b in itertools.pairwise(edges)
        ]
        out += gather(runner.finish([stream], [1.5]), 1)
        tracks.append(np.concatenate([o.audio for o in out]))
        markers.append(runner.markers(stream))
        onsets.append([o.sample for o in out for o in o.onsets])
        assert runner.frames(stream) == (45 if tier.model_fps is None else tier.num_frames(1.5))
    assert len(tracks[0]) == len(tracks[1]) == tier.num_samples(1.5)
    np.testing.assert_allclose(tracks[1], tracks[0], atol=1e-5)
    assert markers[0] == markers[1]
    assert onsets[0] == onsets[1]
    rate = tier.sample_rate
    starts = {int(np.ceil(m.time_s * rate - 1e-9)) for m in markers[0] if m.kind == "impact"}
    assert starts and starts <= set(onsets[0])
