"""Tracks from detections: objects keep their identity across frames, crossings and gaps, and a
reset forgets them."""

from __future__ import annotations

import numpy as np

from service.pipeline.contacts.tracking import Detections, Tracker


def _found(*objects: tuple[float, float], score: float = 0.9, radius: float = 3.0) -> Detections:
    n = len(objects)
    return Detections(
        score=np.full(n, score),
        xy=np.asarray(objects, float).reshape(n, 2),
        radius=np.full(n, radius),
        materials=np.full((n, 7), 1 / 7),
        size=np.full(n, 0.1),
    )


def test_two_objects_keep_their_tracks_through_a_near_pass_at_any_frame_rate() -> None:
    for fps in (24.0, 60.0):
        tracker = Tracker()
        for k in range(int(fps)):
            t = k / fps
            # One falls fast, the other rolls slowly past it; given in either order.
            a = (100.0, 10.0 + 400.0 * t * t)
            b = (80.0 + 30.0 * t, 60.0)
            tracks = tracker.update(t, _found(a, b) if k % 2 else _found(b, a))
        assert len(tracks) == 2
        by_start = sorted(tracks, key=lambda tr: tr.xy[0][1])
        assert np.allclose(by_start[0].xy[-1], a) and np.allclose(by_start[1].xy[-1], b)
        assert all(tr.seen == len(tr.times_s) == int(fps) for tr in tracks)


def test_a_missed_frame_continues_the_track_and_a_long_gap_ends_it() -> None:
    tracker = Tracker()
    tracker.update(0.0, _found((50.0, 50.0)))
    tracker.update(0.04, _found((52.0, 50.0)))
    tracker.update(0.08, _found())  # not found once
    (track,) = tracker.update(0.12, _found((56.0, 50.0)))
    assert track.id == 0 and track.seen == 3 and len(track.times_s) == 4
    assert np.isnan(track.xy[2]).all()
    for k in range(4):
        tracks = tracker.update(0.16 + 0.04 * k, _found())
    assert tracks == [] and tracker.ended == [track]


def test_weak_detections_start_nothing_and_reset_forgets() -> None:
    tracker = Tracker()
    assert tracker.update(0.0, _found((10.0, 10.0), score=0.4)) == []
    assert len(tracker.update(0.04, _found((10.0, 10.0)))) == 1
    tracker.reset()
    (track,) = tracker.update(0.08, _found((11.0, 10.0)))
    assert track.id == 1 and len(track.times_s) == 1 and len(tracker.ended) == 1


def test_a_fast_bounce_and_a_fast_entry_stay_one_track() -> None:
    """A ball falls in from the top edge at 24 fps, 30 px on its second frame, and bounces:
    its motion reverses, 48 px from where constant velocity predicts it. It is one object
    throughout, and a slow one beside it keeps its own track."""
    fps = 24.0
    tracker = Tracker()
    ys = [4.0, 34.0, 68.0, 86.0, 56.0, 32.0, 14.0, 2.0]
    for k, y in enumerate(ys):
        tracks = tracker.update(k / fps, _found((60.0, y), (100.0 + k, 80.0)))
    assert len(tracks) == 2 and sorted(tr.id for tr in tracks) == [0, 1]
    assert all(tr.seen == len(ys) for tr in tracks)
