"""The motion-first contact detector's stages: flow, windows, events, the streaming detector."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from service.pipeline.motion.detector import MotionDetector
from service.pipeline.motion.events import EventPicker, HeadMaps, local_peaks
from service.pipeline.motion.flow import FACTOR, MotionField, blocks
from service.pipeline.motion.window import AHEAD, BACK, CHANNELS, WINDOW, stack, window

W, H = 320, 180


def texture(seed: int, width: int = 2 * W, height: int = 2 * H) -> np.ndarray:
    rng = np.random.default_rng(seed)
    grey = cv2.GaussianBlur((rng.random((height, width)) * 255).astype(np.uint8), (9, 9), 2.5)
    grey = cv2.normalize(grey, None, 0, 255, cv2.NORM_MINMAX)
    return np.repeat(grey[..., None], 3, axis=2)


SPOTS = np.where(texture(99, 24, 24) > 128, 255, 40).astype(np.uint8)  # bright, dark spots


def scene(background: np.ndarray, x0: float, y0: float, disc_at: tuple[float, float] | None):
    """The background seen from (x0, y0) (a camera's pan), with a bright spotted disc on it."""
    m = np.float32([[1, 0, -x0], [0, 1, -y0]])
    frame = cv2.warpAffine(background, m, (W, H), flags=cv2.INTER_LINEAR)
    if disc_at is not None:
        x, y = round(disc_at[0]), round(disc_at[1])
        inside = np.zeros((24, 24), np.uint8)
        cv2.circle(inside, (12, 12), 10, 1, -1)
        patch = frame[y - 12 : y + 12, x - 12 : x + 12]
        patch[inside > 0] = SPOTS[inside > 0]
    return frame


def test_blocks_are_the_means_and_maxima_of_whole_blocks():
    x = np.random.default_rng(0).random((2, 18, 33)).astype(np.float32)
    whole = x[:, :16, :32].reshape(2, 4, 4, 8, 4)
    np.testing.assert_allclose(blocks(x, 4), whole.mean(axis=(2, 4)), atol=1e-6)
    np.testing.assert_array_equal(blocks(x, 4, "max"), whole.max(axis=(2, 4)))


def test_the_maps_have_the_quarter_picture_shape():
    field = MotionField(W, H)
    assert field.push(0.0, scene(texture(1), 10, 10, None)) is None
    interval = field.push(1 / 30, scene(texture(1), 12, 10, None))
    assert interval is not None
    h, w = H // FACTOR, W // FACTOR
    assert interval.flow.shape == (2, h, w)
    assert interval.speed_max.shape == interval.warp_error.shape == interval.grey.shape == (h, w)
    assert stack(interval).shape == (CHANNELS, h, w)


def test_a_pan_leaves_the_scene_still_and_the_moving_body_alone_moves():
    background, field = texture(2), MotionField(W, H)
    field.push(0.0, scene(background, 40, 30, (100, 90)))
    interval = field.push(1 / 30, scene(background, 46, 30, (108, 90)))
    # the camera moved 6 px to the right, so the scene 6 px left; the disc 8 px right on screen
    np.testing.assert_allclose(interval.camera[:, 2], [-6.0, 0.0], atol=0.5)
    speed = np.hypot(*interval.flow)
    disc = speed[90 // FACTOR - 2 : 90 // FACTOR + 2, 100 // FACTOR : 108 // FACTOR + 1]
    still = np.delete(speed, np.s_[15:30], axis=0)  # rows away from the disc
    assert disc.max() > 3.0
    assert np.percentile(still, 95) < 0.5
    assert np.percentile(np.delete(interval.change, np.s_[15:30], axis=0), 95) < 0.05


def test_a_body_too_fast_for_the_flow_still_shows_as_change():
    background, field = texture(2), MotionField(W, H)
    field.push(0.0, scene(background, 40, 30, (100, 90)))
    interval = field.push(1 / 30, scene(background, 46, 30, (140, 90)))
    row = 90 // FACTOR
    assert interval.change[row, 100 // FACTOR] > 0.2  # where it was
    assert interval.change[row, 140 // FACTOR] > 0.2  # where it is
    assert np.percentile(np.delete(interval.change, np.s_[15:30], axis=0), 95) < 0.05


def test_velocity_is_per_thirtieth_of_a_second_at_any_rate():
    background = texture(3)
    speeds = []
    for fps in (15, 60):
        field = MotionField(W, H)
        step = 90 / fps  # 90 px/s in both: 6 px an interval at 15 fps, 1.5 at 60
        field.push(0.0, scene(background, 0, 0, (100, 90)))
        interval = field.push(1 / fps, scene(background, 0, 0, (100 + step, 90)))
        r, c = 90 // FACTOR, 100 // FACTOR
        speeds.append(float(np.median(interval.flow[0, r - 2 : r + 2, c - 2 : c + 3])))
    assert speeds[0] > 1.5
    assert speeds[1] == pytest.approx(speeds[0], rel=0.3)


def test_a_cut_starts_the_motion_over():
    field = MotionField(W, H)
    field.push(0.0, scene(texture(4), 0, 0, None))
    assert field.push(1 / 30, scene(texture(5), 0, 0, None), cut=True) is None
    assert field.push(2 / 30, scene(texture(5), 0, 0, None)) is not None


def test_frames_out_of_order_are_refused():
    field = MotionField(W, H)
    field.push(0.1, scene(texture(6), 0, 0, None))
    with pytest.raises(ValueError, match="increasing"):
        field.push(0.1, scene(texture(6), 0, 0, None))


def test_a_window_holds_its_intervals_in_order_and_zeros_where_none_were_seen():
    stacks = [np.full((CHANNELS, 3, 4), i, np.float32) for i in range(5)]
    x = window(stacks, 0)
    assert x.shape == (WINDOW * CHANNELS, 3, 4)
    per = x.reshape(WINDOW, CHANNELS, 3, 4)[:, 0, 0, 0]
    assert per.tolist() == [0, 0, 0, 1][: BACK + 1 + AHEAD]  # two missing, then 0 and 1
    assert window(stacks, 4).reshape(WINDOW, CHANNELS, 3, 4)[-1].max() == 0.0


def maps(probability: np.ndarray, u: float = 0.5) -> HeadMaps:
    h, w = probability.shape
    return HeadMaps(
        probability,
        np.full((h, w), u, np.float32),
        np.zeros((h, w), np.float32),
        np.full((7, h, w), 1 / 7, np.float32),
    )


def test_peaks_are_local_maxima_over_the_threshold_most_probable_first():
    p = np.zeros((10, 12), np.float32)
    p[2, 3], p[2, 4], p[7, 9], p[5, 5] = 0.6, 0.5, 0.9, 0.2
    assert local_peaks(p, 0.3) == [(7, 9), (2, 3)]


def test_an_event_is_timed_inside_its_interval_and_fires_once():
    picker = EventPicker(0.5)
    p = np.zeros((10, 12), np.float32)
    p[4, 4] = 0.9
    first = picker.decide(maps(p, u=0.25), 1.0, 1.04)
    assert [round(e.time_s, 4) for e in first] == [1.01]
    assert picker.decide(maps(p), 1.04, 1.08) == []  # the same place, the next interval
    later = picker.decide(maps(p), 1.5, 1.54)
    assert len(later) == 1


def test_two_places_at_once_are_one_sound():
    picker = EventPicker(0.5)
    p = np.zeros((20, 30), np.float32)
    p[3, 3], p[15, 25] = 0.9, 0.7
    events = picker.decide(maps(p), 0.0, 0.033)
    assert len(events) == 1 and events[0].probability == pytest.approx(0.9)


class Pulse:
    """A head that answers one contact, at the middle cell and u = 0.4, for interval number
    `at` of what it is shown (counted across its calls)."""

    def __init__(self, at: int) -> None:
        self.at, self.seen = at, 0

    def __call__(self, x: np.ndarray) -> dict[str, np.ndarray]:
        b, _, h, w = x.shape
        h2, w2 = (h + 1) // 2, (w + 1) // 2
        p = np.zeros((b, h2, w2), np.float32)
        for i in range(b):
            if self.seen + i == self.at:
                p[i, h2 // 2, w2 // 2] = 0.95
        self.seen += b
        return {
            "probability": p,
            "u": np.full((b, h2, w2), 0.4, np.float32),
            "strength": np.zeros((b, h2, w2), np.float32),
            "material": np.full((b, 7, h2, w2), 1 / 7, np.float32),
        }


def test_the_detector_decides_each_interval_once_with_its_lookahead():
    head = Pulse(at=3)
    detector = MotionDetector(W, H, head, threshold=0.5)
    background = texture(7)
    times = np.arange(8) / 25
    out, events = [], []
    for k, t in enumerate(times):
        found = detector.push(float(t), scene(background, 0, 0, (60 + 5 * k, 90)))
        out.append(len(found))
        events += found
        # interval k - 1 - AHEAD becomes decidable with frame k
        assert head.seen == max(0, k - AHEAD)
    events += detector.finish()
    assert head.seen == len(times) - 1
    assert [round(e.time_s, 4) for e in events] == [round(times[3] + 0.4 / 25, 4)]
    assert out.index(1) == 3 + 1 + AHEAD
