"""Render a shot's pictures: backdrop through the camera, bodies, water, rain and light.

A picture at time t shows the scene at t; with an exposure of s seconds it is the average of
sub-frames spread evenly over [t - s/2, t + s/2]. The number of sub-frames follows the motion:
enough that nothing moves more than ~1.5 px between two (capped at 32 for bodies and 12 for the
backdrop), so a fast strike smears into a streak while a still frame costs one sub-frame. When
the camera is still, only the box the moving bodies sweep is re-rendered per sub-frame.

Bodies are premultiplied RGBA sprites warped into place with `cv2.warpAffine` (bilinear), which
is what keeps a 4 s 320x180 clip to a fraction of a second on one core.
"""

from __future__ import annotations

from collections.abc import Iterator

import cv2
import numpy as np

from engines.sim.sprites.kinematics import AL, SX, TH, Linear, X, Y
from engines.sim.sprites.scene import Flow, Rain, Shot
from engines.sim.sprites.shapes import Sprite

PROBES = 5  # poses per exposure used to measure how far things move
STEP_PX = 1.5
MAX_SUB, MAX_SUB_CAMERA = 32, 12


def _offsets(shutter_s: float, k: int) -> np.ndarray:
    return shutter_s * ((np.arange(k) + 0.5) / k - 0.5) if k > 1 else np.zeros(1)


def _to3(m: np.ndarray) -> np.ndarray:
    out = np.zeros((*m.shape[:-2], 3, 3))
    out[..., :2, :] = m
    out[..., 2, 2] = 1.0
    return out


class _Layer:
    """One actor's sprite matrices (sprite px -> picture px) and boxes at a set of times.

    A body gliding at constant velocity under a still camera is smeared once, by blurring its
    sprite along its path, and drawn at the frame times (`frame_t`) instead of per sub-frame:
    the same picture for a fraction of the cost (traffic, rain of bodies)."""

    def __init__(
        self, shot: Shot, index: int, t: np.ndarray, frame_t: np.ndarray, cams, shutter_s: float
    ) -> None:
        actor = shot.actors[index]
        sprite = actor.sprite
        motion = actor.motion
        round_body = len(actor.shape.ellipses) == 1 and not actor.shape.polygons
        steady = isinstance(motion, Linear) and (motion.spin == 0 or round_body)
        if steady and not shot.camera.moving:
            if shutter_s * np.hypot(motion.vx, motion.vy) > 1.0:
                sprite = _smeared(sprite, motion.vx * shutter_s, motion.vy * shutter_s)
            t = frame_t
        # colour and alpha (repeated per channel) apart: two 3-channel warps and OpenCV
        # element-wise ops blend ~2x faster than one RGBA warp and numpy broadcasting
        self.rgb = np.ascontiguousarray(sprite.rgba[..., :3])
        self.a3 = np.ascontiguousarray(np.repeat(sprite.rgba[..., 3:], 3, axis=2))
        p = motion.pose(t)
        c, s = np.cos(p[:, TH]), np.sin(p[:, TH])
        body = np.zeros((len(t), 3, 3))
        body[:, 0, 0], body[:, 0, 1], body[:, 0, 2] = c * p[:, SX], -s, p[:, X]
        body[:, 1, 0], body[:, 1, 1], body[:, 1, 2] = s * p[:, SX], c, p[:, Y]
        body[:, 2, 2] = 1.0
        ox, oy = sprite.origin
        shift = np.array([[1.0, 0.0, -ox], [0.0, 1.0, -oy], [0.0, 0.0, 1.0]])
        self.m = (_to3(cams) @ body @ shift)[:, :2, :]
        h, w = self.rgb.shape[:2]
        corners = np.array(
            [[-0.5, -0.5, 1], [w - 0.5, -0.5, 1], [-0.5, h - 0.5, 1], [w - 0.5, h - 0.5, 1]]
        )
        self.corners = np.einsum("tij,kj->tki", self.m, corners)  # (T, 4, 2)
        self.lo = np.floor(self.corners.min(axis=1)).astype(int)  # (T, 2) box in picture px
        self.hi = np.ceil(self.corners.max(axis=1)).astype(int) + 1
        self.alpha = p[:, AL]


def _smeared(sprite: Sprite, dx: float, dy: float) -> Sprite:
    """The sprite averaged along the segment (-dx/2, -dy/2) .. (dx/2, dy/2) in scene px."""
    pad = int(np.ceil(max(abs(dx), abs(dy)) / 2)) + 1
    k = 2 * pad + 1
    kernel = np.zeros((k * 4, k * 4), np.float32)
    c = 2 * k - 0.5  # the kernel's centre, drawn 4x larger for a smooth line
    p0 = (int((c - 2 * dx) * 16), int((c - 2 * dy) * 16))
    p1 = (int((c + 2 * dx) * 16), int((c + 2 * dy) * 16))
    cv2.line(kernel, p0, p1, 1.0, 4, cv2.LINE_AA, 4)
    kernel = cv2.resize(kernel, (k, k), interpolation=cv2.INTER_AREA)
    kernel /= kernel.sum()
    padded = cv2.copyMakeBorder(sprite.rgba, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=0)
    rgba = cv2.filter2D(padded, -1, kernel, borderType=cv2.BORDER_CONSTANT)
    return Sprite(rgba, (sprite.origin[0] + pad, sprite.origin[1] + pad))


def _travel(corners: np.ndarray, n_frames: int) -> np.ndarray:
    """Longest path (px) any of the corners (T, 4, 2), probed PROBES times per exposure,
    covers during each exposure."""
    c = corners.reshape(n_frames, PROBES, 4, 2)
    return np.linalg.norm(np.diff(c, axis=1), axis=3).sum(axis=1).max(axis=1)


def _composite(canvas: np.ndarray, box: tuple[int, int, int, int], layer: _Layer, i: int) -> None:
    """Draw layer at time index i onto canvas, which shows picture box (x0, y0, x1, y1)."""
    if layer.alpha[i] <= 1e-3:
        return
    bx0, by0, bx1, by1 = box
    x0, y0 = max(layer.lo[i, 0], bx0), max(layer.lo[i, 1], by0)
    x1, y1 = min(layer.hi[i, 0], bx1), min(layer.hi[i, 1], by1)
    if x1 <= x0 or y1 <= y0:
        return
    m = layer.m[i].copy()
    m[:, 2] -= (x0, y0)
    size = (x1 - x0, y1 - y0)
    rgb = cv2.warpAffine(layer.rgb, m, size, flags=cv2.INTER_LINEAR)
    a3 = cv2.warpAffine(layer.a3, m, size, flags=cv2.INTER_LINEAR)
    if layer.alpha[i] < 1.0:
        rgb *= np.float32(layer.alpha[i])
        a3 *= np.float32(layer.alpha[i])
    rows, cols = slice(y0 - by0, y1 - by0), slice(x0 - bx0, x1 - bx0)
    canvas[rows, cols] = cv2.add(cv2.multiply(canvas[rows, cols], 1.0 - a3), rgb)


def render(
    shot: Shot, times: np.ndarray, shutter_s: float, size: tuple[int, int]
) -> Iterator[np.ndarray]:
    """Yield (h, w, 3) float32 pictures (display values, not clipped) at `times`."""
    k_act, k_cam = _sub_frames(shot, times, shutter_s, size)
    sub_t = np.concatenate([t + _offsets(shutter_s, k) for t, k in zip(times, k_act, strict=True)])
    starts = np.concatenate([[0], np.cumsum(k_act)])
    cams = shot.camera.matrices(sub_t)
    layers = [
        _Layer(shot, i, sub_t, np.repeat(times, k_act), cams, shutter_s)
        for i in range(len(shot.actors))
    ]
    still = (
        None if shot.camera.moving else _backdrop(shot, shot.camera.matrices(times[:1])[0], size)
    )
    for f, t in enumerate(times):
        if still is not None:
            bg = still.copy()
        else:
            ms = shot.camera.matrices(t + _offsets(shutter_s, int(k_cam[f])))
            bg = sum(_backdrop(shot, m, size) for m in ms) / len(ms)
        for flow in shot.flows:
            _flow(bg, flow, shot.camera.matrices(np.array([t]))[0], t, shutter_s)
        frame = _bodies(bg, layers, int(starts[f]), int(starts[f + 1]))
        if shot.rain is not None:
            _rain(frame, shot.rain, t, shutter_s)
        level = shot.light.level(t)
        if shot.light.gain is not None:
            frame *= (shot.light.gain * level)[..., None]
        elif level != 1.0:
            frame *= np.float32(level)
        yield frame


def _sub_frames(shot: Shot, times: np.ndarray, shutter_s: float, size) -> tuple[np.ndarray, ...]:
    """Sub-frames per picture for the bodies and for the backdrop, from how far they move
    during each exposure (probed at PROBES poses)."""
    n = len(times)
    if shutter_s <= 0:
        return np.ones(n, int), np.ones(n, int)
    probe_t = (times[:, None] + _offsets(shutter_s, PROBES)[None, :]).ravel()
    probe_cams = shot.camera.matrices(probe_t)
    travel = np.zeros(n)
    for i in range(len(shot.actors)):
        layer = _Layer(shot, i, probe_t, np.repeat(times, PROBES), probe_cams, 0.0)
        travel = np.maximum(travel, _travel(layer.corners, n))
    k_act = np.clip(np.ceil(travel / STEP_PX), 1, MAX_SUB).astype(int)
    if not shot.camera.moving:
        return k_act, np.ones(n, int)
    w, h = size
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], np.float64)
    seen = np.einsum("tij,kj->tki", probe_cams, corners)
    k_cam = np.clip(np.ceil(_travel(seen, n) / STEP_PX), 1, MAX_SUB_CAMERA).astype(int)
    return k_act, k_cam


def _bodies(bg: np.ndarray, layers: list[_Layer], i0: int, i1: int) -> np.ndarray:
    """The bodies over the backdrop, averaged over sub-frames i0..i1 where they move."""
    h, w = bg.shape[:2]
    full = (0, 0, w, h)
    frame = bg.copy()
    for layer in layers:
        _composite(frame, full, layer, i0)
    box = _swept_box(layers, i0, i1, full) if i1 - i0 > 1 else None
    if box is None:
        return frame
    x0, y0, x1, y1 = box
    acc = np.zeros((y1 - y0, x1 - x0, 3), np.float32)
    for i in range(i0, i1):
        sub = bg[y0:y1, x0:x1].copy()
        for layer in layers:
            _composite(sub, box, layer, i)
        acc += sub
    frame[y0:y1, x0:x1] = acc / (i1 - i0)
    return frame


def _backdrop(shot: Shot, cam: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    canvas_to_scene = np.array([[1.0, 0.0, shot.origin[0]], [0.0, 1.0, shot.origin[1]], [0, 0, 1]])
    m = (_to3(cam) @ canvas_to_scene)[:2]
    return cv2.warpAffine(
        shot.canvas, m, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
    )


def _swept_box(layers: list[_Layer], i0: int, i1: int, full) -> tuple[int, int, int, int] | None:
    """Picture box covering every layer that moves during the exposure, or None."""
    lo, hi = np.array([np.inf, np.inf]), np.array([-np.inf, -np.inf])
    for layer in layers:
        c = layer.corners[i0:i1]
        if np.ptp(c, axis=0).max() < 1e-3:
            continue
        lo, hi = np.minimum(lo, c.min(axis=(0, 1))), np.maximum(hi, c.max(axis=(0, 1)))
    if not np.all(np.isfinite(lo)):
        return None
    x0, y0 = max(int(np.floor(lo[0])) - 1, full[0]), max(int(np.floor(lo[1])) - 1, full[1])
    x1, y1 = min(int(np.ceil(hi[0])) + 2, full[2]), min(int(np.ceil(hi[1])) + 2, full[3])
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _flow(bg: np.ndarray, flow: Flow, cam: np.ndarray, t: float, shutter_s: float) -> None:
    """Paint the streaming texture of `flow` at time t, smeared along its velocity."""
    mh, mw = flow.mask.shape
    shift = np.array([[1.0, 0.0, -flow.vx * t], [0.0, 1.0, -flow.vy * t]])
    tex = cv2.warpAffine(
        flow.tile, shift, (mw, mh), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP
    )
    smear = round(max(abs(flow.vx), abs(flow.vy)) * shutter_s)
    if smear > 1:
        tex = cv2.blur(tex, (smear, 1) if abs(flow.vx) > abs(flow.vy) else (1, smear))
    rgba = np.dstack([tex * flow.mask[..., None], flow.mask]).astype(np.float32)
    place = _to3(cam) @ np.array([[1.0, 0.0, flow.x0], [0.0, 1.0, flow.y0], [0.0, 0.0, 1.0]])
    patch = cv2.warpAffine(rgba, place[:2], (bg.shape[1], bg.shape[0]), flags=cv2.INTER_LINEAR)
    bg *= 1.0 - patch[..., 3:4]
    bg += patch[..., :3]


def _rain(frame: np.ndarray, rain: Rain, t: float, shutter_s: float) -> None:
    h, w = frame.shape[:2]
    span = h + 2 * rain.length + 20
    y = (rain.y + rain.speed * t) % span - rain.length - 10
    x = rain.x + rain.slant * (y - rain.y)
    streak = rain.length + rain.speed * shutter_s
    layer = np.zeros((h, w), np.float32)
    for x0, y0, ln in zip(x, y, streak, strict=True):
        p0 = (int(x0 * 16), int(y0 * 16))
        p1 = (int((x0 + rain.slant * ln) * 16), int((y0 + ln) * 16))
        cv2.line(layer, p0, p1, 1.0, 1, cv2.LINE_AA, 4)
    a = (layer * rain.opacity)[..., None]
    frame *= 1.0 - a
    frame += a * np.asarray(rain.rgb, np.float32)
