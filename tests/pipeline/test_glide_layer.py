"""Rolling and sliding (service.pipeline.motion.layer): a continuous layer whose level follows
the speed, starting and stopping with the motion, the same however the stream is chunked; and
through the default tier, a body rolling across the picture is heard as a roll, not as hits."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from service.config import Settings
from service.pipeline.engine import FoleyEngine
from service.pipeline.motion.layer import CONFIRM_S, EASE_S, Glide, GlideLayer
from service.pipeline.types import RenderOptions

RATE = 48000
DT = 1 / 30


def glides(speeds: list[float], slowing: float = 0.0, turn_rad_s: float = 0.0) -> list[Glide]:
    """One interval a speed, heading along x, turning at `turn_rad_s`."""
    return [
        Glide(
            k * DT,
            (k + 1) * DT,
            s,
            slowing,
            (np.cos(k * DT * turn_rad_s), np.sin(k * DT * turn_rad_s)),
        )
        for k, s in enumerate(speeds)
    ]


def play(layer: GlideLayer, items: list[Glide], chunk: int, *, eager: bool = False) -> np.ndarray:
    """Each interval added before its samples are taken, taken in pieces of `chunk`: up to its
    start (what a batch of frames allows) or, `eager`, through its end (a live stream's)."""
    out = []
    for g in items:
        layer.add(g)
        until = round((g.end_s if eager else g.start_s) * RATE)
        while layer.taken < until:
            out.append(layer.take(min(chunk, until - layer.taken)))
    layer.finish(len(items) * DT)
    end = round(len(items) * DT * RATE)
    while layer.taken < end:
        out.append(layer.take(min(chunk, end - layer.taken)))
    return np.concatenate(out)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x**2)))


def test_chunked_equals_whole() -> None:
    items = glides([0, 0] + [3, 4, 5, 6] * 3 + [6, 2, 0.5, 6, 0.5, 0] + [8] * 12 + [0])
    whole = play(GlideLayer(RATE), items, chunk=10**9)
    for chunk in (1, 37, 1600, 4096):
        for eager in (False, True):
            got = play(GlideLayer(RATE), items, chunk=chunk, eager=eager)
            np.testing.assert_allclose(got, whole, rtol=0, atol=1e-12)


def test_the_level_follows_the_speed_and_stops_with_the_motion() -> None:
    judged = math.ceil(CONFIRM_S / DT - 1e-9)  # intervals a glide is judged on before heard
    steps = 9 + judged  # each speed held this long, and judged again on each change
    speeds = [0.0] * 6 + [2.0] * steps + [4.0] * steps + [8.0] * steps + [0.0] * 12
    audio = play(GlideLayer(RATE), glides(speeds), chunk=800)
    tail = round(6 * DT * RATE)
    ends = [round((6 + steps * (i + 1)) * DT * RATE) for i in range(3)]
    steady = [rms(audio[end - tail : end]) for end in ends]  # each speed's last 0.2 s
    assert steady[0] > 0 and steady[1] / steady[0] == pytest.approx(2.0, rel=0.25)
    assert steady[2] / steady[1] == pytest.approx(2.0, rel=0.25)
    assert np.abs(audio[: round((6 + judged - 1) * DT * RATE)]).max() == 0.0  # judged first
    assert rms(audio[-tail:]) < 0.02 * steady[2]  # and faded after the motion
    heard = np.flatnonzero(np.abs(audio) > 0)[0]
    assert rms(audio[heard : heard + 48]) < 0.2 * steady[0]  # fades in: not an attack
    assert tail > EASE_S * RATE


def test_a_segment_is_marked_by_its_kind_from_start_to_end() -> None:
    judged = math.ceil(CONFIRM_S / DT - 1e-9)
    layer = GlideLayer(RATE)
    play(layer, glides([0] + [3] * (judged + 4) + [0, 0]), chunk=800)
    assert [(m.kind, round(m.time_s, 3)) for m in layer.markers] == [
        ("roll_start", round(DT, 3)),
        ("roll_end", round((judged + 5) * DT, 3)),
    ]
    sliding = GlideLayer(RATE)
    play(sliding, glides([6.0 - 0.2 * k for k in range(judged + 4)] + [0, 0], 0.1), chunk=800)
    assert [m.kind for m in sliding.markers] == ["slide_start", "slide_end"]
    assert all(m.strength is None for m in sliding.markers)


@pytest.mark.parametrize(
    ("turn_rad_s", "slowing"), [(3.0, 0.0), (0.0, -0.15)], ids=["swung", "falling"]
)
def test_what_turns_or_gains_speed_is_not_a_glide(turn_rad_s: float, slowing: float) -> None:
    layer = GlideLayer(RATE)
    audio = play(layer, glides([5.0] * 30 + [0, 0], slowing, turn_rad_s), chunk=800)
    assert layer.markers == [] and np.abs(audio).max() == 0.0


def rolling_clip(path: Path, *, speed_px_s: float = 180.0, fps: int = 30) -> Path:
    """A textured disc rolling left to right across a textured floor, 2 s."""
    from engines.data.clips import encode_frames

    rng = np.random.default_rng(4)
    floor = cv2.resize(
        rng.integers(60, 200, (180 // 6, 320 // 6, 3)).astype(np.uint8),
        (320, 180),
        interpolation=cv2.INTER_NEAREST,
    )
    frames = []
    for k in range(2 * fps):
        t = k / fps
        img = floor.copy()
        cx, cy, r = 40 + speed_px_s * t, 120, 18
        angle = speed_px_s * t / r
        cv2.circle(img, (int(cx * 16), int(cy * 16)), r * 16, (30, 30, 200), -1, cv2.LINE_AA, 4)
        for i in range(6):  # spokes: the texture turns as it rolls
            a = angle + i * np.pi / 3
            end = (int((cx + r * np.cos(a)) * 16), int((cy + r * np.sin(a)) * 16))
            cv2.line(img, (int(cx * 16), int(cy * 16)), end, (240, 240, 90), 3, cv2.LINE_AA, 4)
        frames.append(img)
    encode_frames(path, np.stack(frames), Fraction(fps))
    return path


def test_a_rolling_body_is_a_continuous_layer_not_a_train_of_hits(tmp_path: Path) -> None:
    from engines.eval.sync import read_audio

    engine = FoleyEngine.load(Settings(cache_max_bytes=0))
    video = rolling_clip(tmp_path / "roll.mp4")
    result = engine.render(video, tmp_path / "roll.wav", RenderOptions(format="wav"))
    kinds = [m.kind for m in result.markers]
    assert "impact" not in kinds, result.markers
    assert kinds[0] == "roll_start" and kinds.count("roll_start") <= 2, kinds
    audio, _ = read_audio(tmp_path / "roll.wav")
    bins = audio[: len(audio) // 4800 * 4800].reshape(-1, 4800)  # 100 ms
    level = np.sqrt(np.mean(bins**2, axis=1))
    # heard once judged (CONFIRM_S in) all the way across, until the body leaves the picture
    assert np.all(level[5:15] > 0.1 * level.max())
