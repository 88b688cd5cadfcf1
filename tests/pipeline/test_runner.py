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


def _frames(
    engine, n: int, *, hit: float = 12.3, x: float = 0.5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A bright square falling on a dark picture to a floor it reaches at frame `hit`, at `x`
    of the width: a contact every kind fires on."""
    rng = np.random.default_rng(seed)
    tier = engine.tier
    rgb = np.full((n, tier.height, tier.width, 3), 20, np.uint8)
    floor, side, left = tier.height * 2 // 3, max(6, tier.height // 12), int(x * tier.width)
    for k in range(n):
        y = int(min(k / hit, 1.0) * (floor - side))
        rgb[k, y : y + side, left : left + side] = 230
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


@pytest.mark.parametrize("name", ENGINES)
def test_streams_pushed_together_give_what_each_gives_alone(
    name: str, request: pytest.FixtureRequest
) -> None:
    """The live worker's batch: streams in one push (for `motion`, every stream's flow measured
    at once) keep their own state and their own track."""
    engine = request.getfixturevalue(name)
    clips = [_frames(engine, 30, hit=8.5, x=0.2), _frames(engine, 30, seed=1)]
    alone = []
    for pts, rgb in clips:
        runner = create_runner(engine.tier, engine.backend)
        stream = runner.open()
        out = gather(runner.push([stream], [(pts, rgb)]), 1)
        out += gather(runner.finish([stream], [1.0]), 1)
        alone.append(np.concatenate([o.audio for o in out]))
    runner = create_runner(engine.tier, engine.backend)
    streams = [runner.open(), runner.open()]
    audio: list[list[np.ndarray]] = [[], []]
    for k in range(0, 30, 3):
        frames = [(pts[k : k + 3], rgb[k : k + 3]) for pts, rgb in clips]
        for i, out in enumerate(gather(runner.push(streams, frames), 2)):
            audio[i].append(out.audio)
    for i, out in enumerate(gather(runner.finish(streams, [1.0, 1.0]), 2)):
        audio[i].append(out.audio)
    for mine, reference in zip(audio, alone, strict=True):
        np.testing.assert_allclose(np.concatenate(mine), reference, atol=1e-5)
    assert not np.allclose(alone[0], alone[1])
