"""What a camera and a delivery chain do to the pictures: sensor noise, letterbox bars, burnt-in
overlays (captions, logos), JPEG compression and, sometimes, a real H.264 round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import av
import cv2
import numpy as np

from engines.sim.sprites.textures import random_rgb

# Noise is drawn once per clip and reused, flipped: drawing it per frame would cost more than
# rendering the frame.
NOISE_FIELDS = 4


@dataclass(frozen=True)
class Delivery:
    size: tuple[int, int]  # frame (w, h)
    picture: tuple[int, int, int, int]  # picture box (x0, y0, w, h) inside the frame; bars outside
    bar_rgb: tuple[int, int, int]
    noise: float  # Gaussian sigma in display units (1.0 = full scale)
    salt: float  # fraction of pixels set to black or white per frame
    jpeg: int | None  # JPEG quality, or none
    jpeg_share: float  # fraction of frames that go through JPEG
    h264_kbps: float | None  # bitrate of an H.264 round trip, or none
    overlay: np.ndarray | None  # (h, w, 4) uint8 RGBA burnt into every frame, or none


def sample_delivery(rng: np.random.Generator, size: tuple[int, int], picture) -> Delivery:
    w, h = size
    noise = (
        0.0 if rng.random() < 0.2 else float(np.exp(rng.uniform(np.log(0.5), np.log(8.0)))) / 255
    )
    jpeg = int(rng.integers(30, 96)) if rng.random() < 0.35 else None
    return Delivery(
        size=size,
        picture=picture,
        bar_rgb=tuple(int(v) for v in rng.integers(0, 20, 3)),
        noise=noise,
        salt=float(rng.uniform(1e-4, 1e-3)) if rng.random() < 0.2 else 0.0,
        jpeg=jpeg,
        jpeg_share=1.0 if rng.random() < 0.7 else float(rng.uniform(0.2, 0.8)),
        h264_kbps=float(rng.uniform(60, 500) * w * h / (320 * 180))
        if rng.random() < 0.08
        else None,
        overlay=_overlay(rng, size) if rng.random() < 0.2 else None,
    )


def _overlay(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """Static graphics: a caption bar with text, a corner logo, a timestamp."""
    w, h = size
    layer = np.zeros((h, w, 4), np.uint8)
    scale = h / 360
    if rng.random() < 0.6:
        y0 = int(h * rng.uniform(0.75, 0.9))
        bar = np.array(
            [*(int(v) for v in rng.integers(0, 60, 3)), int(rng.integers(120, 230))], np.uint8
        )
        layer[y0 : y0 + int(h * rng.uniform(0.06, 0.15))] = bar
        _text(rng, layer, (int(w * 0.05), y0 + int(22 * scale)), scale)
    if rng.random() < 0.5:
        _text(
            rng, layer, (int(w * rng.uniform(0.02, 0.6)), int(h * rng.uniform(0.06, 0.12))), scale
        )
    if rng.random() < 0.4:
        r = max(int(h * rng.uniform(0.03, 0.07)), 2)
        c = (int(w - 2 * r - 4), int(2 * r + 4))
        colour = (*tuple(int(v * 255) for v in random_rgb(rng)), int(rng.integers(120, 256)))
        cv2.circle(layer, c, r, colour, -1, cv2.LINE_AA)
    return layer


def _text(rng: np.random.Generator, layer: np.ndarray, at: tuple[int, int], scale: float) -> None:
    """A line of random capitals and digits with its baseline at `at` (moved down to fit)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 :.-"
    text = "".join(rng.choice(list(letters), int(rng.integers(4, 24))))
    colour = (*(int(v) for v in rng.integers(180, 256, 3)), 255)
    font, size = cv2.FONT_HERSHEY_SIMPLEX, max(0.3, 0.7 * scale)
    (_, height), _ = cv2.getTextSize(text, font, size, 1)
    cv2.putText(layer, text, (at[0], max(at[1], height + 2)), font, size, colour, 1, cv2.LINE_AA)


def noise_bank(rng: np.random.Generator, d: Delivery) -> list[np.ndarray]:
    _, _, pw, ph = d.picture
    if d.noise <= 0:
        return []
    return [
        rng.normal(0.0, d.noise * 255, (ph, pw, 3)).astype(np.float32) for _ in range(NOISE_FIELDS)
    ]


def deliver(
    picture: np.ndarray, d: Delivery, bank: list[np.ndarray], rng: np.random.Generator
) -> np.ndarray:
    """One float picture (display values) -> one (h, w, 3) uint8 RGB frame."""
    pic = picture * np.float32(255.0)
    if bank:
        field = bank[int(rng.integers(len(bank)))]
        flip = int(rng.integers(4))
        pic += (
            field[::-1]
            if flip == 1
            else field[:, ::-1]
            if flip == 2
            else field[::-1, ::-1]
            if flip == 3
            else field
        )
    np.clip(pic, 0.0, 255.0, out=pic)
    u8 = (pic + 0.5).astype(np.uint8)
    if d.salt > 0:
        k = int(d.salt * u8.shape[0] * u8.shape[1]) + 1
        ys, xs = rng.integers(0, u8.shape[0], k), rng.integers(0, u8.shape[1], k)
        u8[ys, xs] = rng.choice([0, 255], (k, 1)).astype(np.uint8)
    x0, y0, pw, ph = d.picture
    w, h = d.size
    if (pw, ph) == (w, h):
        frame = u8
    else:
        frame = np.empty((h, w, 3), np.uint8)
        frame[:] = d.bar_rgb
        frame[y0 : y0 + ph, x0 : x0 + pw] = u8
    if d.overlay is not None:
        ys, xs = (
            np.nonzero(d.overlay[..., 3].any(axis=1))[0],
            np.nonzero(d.overlay[..., 3].any(axis=0))[0],
        )
        if len(ys):
            box = (slice(ys[0], ys[-1] + 1), slice(xs[0], xs[-1] + 1))
            over = d.overlay[box]
            a = over[..., 3:4].astype(np.uint16)
            frame[box] = ((frame[box] * (255 - a) + over[..., :3] * a + 127) // 255).astype(
                np.uint8
            )
    if d.jpeg is not None and rng.random() < d.jpeg_share:
        ok, buf = cv2.imencode(".jpg", frame[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, d.jpeg])
        assert ok
        frame = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    return np.ascontiguousarray(frame)


def h264_round_trip(frames: np.ndarray, kbps: float, fps: float) -> np.ndarray:
    """Encode with libx264 (one thread: deterministic) and decode back, same shape."""
    n, h, w, _ = frames.shape
    ew, eh = w + w % 2, h + h % 2  # 4:2:0 needs even sizes
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = ew, eh, "yuv420p"
    enc.time_base = Fraction(1, 1000)
    enc.framerate = Fraction(round(fps * 1000), 1000)
    enc.bit_rate = int(kbps * 1000)
    enc.options = {"preset": "ultrafast", "threads": "1"}
    dec = av.CodecContext.create("h264", "r")
    dec.thread_count = 1
    out: list[np.ndarray] = []
    padded = np.pad(frames, ((0, 0), (0, eh - h), (0, ew - w), (0, 0)), mode="edge")

    def take(packets) -> None:
        for packet in packets:
            out.extend(f.to_ndarray(format="rgb24")[:h, :w] for f in dec.decode(packet))

    for i, frame in enumerate(padded):
        vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
        vf.pts = int(i * 1000 / fps)
        take(enc.encode(vf))
    take(enc.encode(None))
    out.extend(f.to_ndarray(format="rgb24")[:h, :w] for f in dec.decode(None))
    assert len(out) == n, f"H.264 round trip returned {len(out)} of {n} frames"
    return np.stack(out)
