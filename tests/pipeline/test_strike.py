"""The default tier on a rendered stick: a strike on a plate voices one contact on its time, at
any frame rate; a swing that turns round short of the plate voices none.

The stick (150 x 12 px, striped, about a pivot) turns at 3 rad/s, its tip at 450 px/s, over a
blocky texture, in a 320 x 180 H.264 clip rendered through the engine as `foley generate`
renders. A strike stops it on the plate at HIT_S; a swing eases to a halt 0.25 rad short of the
plate at HIT_S and goes back as it came."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.types import RenderOptions

W, H = 320, 180
PIVOT = np.array([40.0, 60.0])
LENGTH, THICKNESS, STRIPES = 150.0, 12, 12
PLATE_Y = 130
HIT_S = 0.517  # between frames at every rate tried
OMEGA = 3.0  # rad/s
DURATION_S = 1.0
TOLERANCE_S = 0.005
AT_PLATE = float(np.arcsin((PLATE_Y - PIVOT[1]) / LENGTH))  # the stick's angle on the plate


def angle(t: float, *, swing: bool) -> float:
    if swing:  # constant deceleration to a turn 0.25 rad short, then back
        return AT_PLATE - 0.25 - 0.5 * (OMEGA / HIT_S) * (t - HIT_S) ** 2
    return AT_PLATE - OMEGA * max(HIT_S - t, 0.0)


def picture(background: np.ndarray, a: float) -> np.ndarray:
    img = background.copy()
    cv2.rectangle(img, (150, PLATE_Y + 2), (300, PLATE_Y + 14), (230, 230, 230), -1)
    tip = PIVOT + LENGTH * np.array([np.cos(a), np.sin(a)])
    for i in range(STRIPES):  # stripes: flow has something to follow along the stick
        p0, p1 = (PIVOT + (tip - PIVOT) * f / STRIPES for f in (i, i + 1))
        colour = (20, 10, 5) if i % 2 else (250, 220, 160)
        a0, a1 = tuple(int(v) for v in np.round(p0 * 16)), tuple(int(v) for v in np.round(p1 * 16))
        cv2.line(img, a0, a1, colour, THICKNESS, cv2.LINE_AA, 4)
    return img


def clip(path: Path, fps: Fraction, *, swing: bool, variable: bool = False) -> Path:
    from engines.data.clips import encode_frames, variable_frame_times

    rng = np.random.default_rng(3)
    blocks = rng.integers(60, 200, (H // 6, W // 6, 3)).astype(np.uint8)
    background = cv2.resize(blocks, (W, H), interpolation=cv2.INTER_NEAREST)
    times = (
        variable_frame_times(DURATION_S, fps, seed=5)
        if variable
        else [Fraction(k) / fps for k in range(int(DURATION_S * fps))]
    )
    frames = np.stack([picture(background, angle(float(t), swing=swing)) for t in times])
    encode_frames(path, frames, fps, times=times if variable else None)
    return path


@pytest.fixture(scope="module")
def engine() -> FoleyEngine:
    return FoleyEngine.load(Settings(cache_max_bytes=0))


def contacts(engine: FoleyEngine, video: Path) -> np.ndarray:
    result = engine.render(video, video.with_suffix(".wav"), RenderOptions(format="wav"))
    return np.asarray(result.events_s)


@pytest.mark.parametrize("fps", [15, 24, Fraction(30000, 1001), 30, 60], ids=str)
def test_a_strike_voices_one_contact_on_its_time(engine, tmp_path, fps):
    found = contacts(engine, clip(tmp_path / "strike.mp4", Fraction(fps), swing=False))
    assert len(found) == 1, found
    assert abs(found[0] - HIT_S) <= TOLERANCE_S, found


def test_a_strike_at_a_variable_frame_rate_voices_one_contact_on_its_time(engine, tmp_path):
    video = clip(tmp_path / "strike.mp4", Fraction(30), swing=False, variable=True)
    found = contacts(engine, video)
    assert len(found) == 1, found
    assert abs(found[0] - HIT_S) <= TOLERANCE_S, found


@pytest.mark.parametrize("fps", [24, 30, 60])
def test_a_swing_that_turns_round_short_of_the_plate_voices_nothing(engine, tmp_path, fps):
    assert len(contacts(engine, clip(tmp_path / "swing.mp4", Fraction(fps), swing=True))) == 0
