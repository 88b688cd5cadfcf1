"""One shot of a scenario kind: camera, backdrop, the kind's cast, and what may be mixed in
(distractor motion from the negative kinds, foreground occluders, rain, flowing water, light).
"""

from __future__ import annotations

import numpy as np

from engines.sim.sprites import gait, negatives
from engines.sim.sprites.ball import rally
from engines.sim.sprites.bodies import boot, free, hand, tool
from engines.sim.sprites.camera import sample_camera, still_camera
from engines.sim.sprites.drop import drop_cast
from engines.sim.sprites.props import PROPS, floor_line, perch
from engines.sim.sprites.scene import Cast, Flow, Light, Rain, Shot
from engines.sim.sprites.stage import Stage, build_stage
from engines.sim.sprites.strike import contact_times, pivot_strikes, press_strikes
from engines.sim.sprites.textures import body_size, painted, pattern, random_rgb, sample_look

KINDS: tuple[str, ...] = ("drop", "strike", "swing", "wobble", "pass", "camera", "static")
# About half the clips carry contacts (drop, strike); swing is the hardest negative, so it
# weighs most among the silent kinds.
KIND_WEIGHTS: dict[str, float] = {
    "drop": 0.22,
    "strike": 0.30,
    "swing": 0.15,
    "wobble": 0.11,
    "pass": 0.10,
    "camera": 0.07,
    "static": 0.05,
}
PIVOT_PROPS = ("floor", "shelf", "table", "drum", "anvil", "wall", "frontal")
PRESS_PROPS = ("floor", "table", "drum", "frontal", "wall")


def build_shot(
    rng: np.random.Generator, kind: str, duration: float, size: tuple[int, int], fps: float
) -> Shot:
    look = sample_look(rng)
    style = _strike_style(rng) if kind == "strike" else None
    walk = gait.sample_gait(rng, size) if style == "steps" else None
    moving = kind == "camera" or (kind != "static" and rng.random() < 0.25)
    follow = walk.speed if walk is not None and rng.random() < 0.5 else None
    camera = sample_camera(rng, duration, size, follow) if moving or follow else still_camera(size)
    stage = build_stage(rng, size, camera.view_bounds(np.linspace(0, duration, 64), size), look)
    stage.fps = fps
    cast = _cast(rng, kind, style, walk, stage, duration)
    if kind != "static" and rng.random() < 0.3:
        _add(cast, _distractor(rng, stage, duration))
    if kind not in ("static", "camera") and rng.random() < 0.15:
        _add(cast, negatives.occluders(rng, stage))
    weather = 0.0 if kind == "static" else 0.3 if kind == "pass" else 0.05
    rain = _rain(rng, size) if rng.random() < weather else None
    flows = [_flow(rng, stage)] if rng.random() < weather else []
    light = _light(rng, kind, size)
    return Shot(stage.finished(), stage.origin, cast.actors, cast.hits, camera, light, flows, rain)


def _strike_style(rng: np.random.Generator) -> str:
    return str(rng.choice(["pivot", "press", "steps", "ball"], p=[0.4, 0.25, 0.2, 0.15]))


def _add(cast: Cast, more: Cast) -> None:
    cast.actors += more.actors
    cast.hits += more.hits


def _cast(rng, kind: str, style, walk, stage: Stage, duration: float) -> Cast:
    if kind == "drop":
        return drop_cast(rng, stage, duration)
    if kind == "strike":
        if style == "steps":
            return gait.walker(rng, stage, floor_line(rng, stage), duration, walk)
        if style == "ball":
            return rally(rng, stage, duration)
        cast = _strikers(rng, stage, duration, style)
        if rng.random() < 0.3:
            _add(cast, _strikers(rng, stage, duration, style))
        return cast
    if kind == "swing":
        cast = Cast([])
        for _ in range(int(rng.integers(1, 3))):
            _add(cast, _swinger(rng, stage, duration))
        return cast
    if kind == "wobble":
        return _wobbler(rng, stage, duration)
    if kind == "pass":
        return (
            negatives.traffic(rng, stage, duration)
            if rng.random() < 0.4
            else negatives.passers(rng, stage, duration)
        )
    return negatives.stills(rng, stage, duration)


def _driven_body(rng, stage: Stage, style: str, at):
    w, h = stage.size
    behind = stage.colour_at(*at)
    if style == "pivot":
        kind = str(rng.choice(["stick", "drumstick", "hammer", "mallet"]))
        length = body_size(rng, min(w, h), 0.2, 0.9)
        return tool(rng, kind, length, stage.look, behind)
    size = body_size(rng, min(w, h), 0.08, 0.4)
    which = rng.random()
    if which < 0.4:
        return hand(rng, size, stage.look)
    if which < 0.6:
        return boot(rng, size, stage.look, behind)
    return free(rng, str(rng.choice(["ball", "box", "blob", "ellipse"])), size, stage.look, behind)


def _strikers(rng, stage: Stage, duration: float, style: str) -> Cast:
    props = PIVOT_PROPS if style == "pivot" else PRESS_PROPS
    drive = pivot_strikes if style == "pivot" else press_strikes
    for _ in range(3):  # a surface the body cannot reach cleanly: try another
        surface = PROPS[str(rng.choice(props))](rng, stage)
        body = _driven_body(rng, stage, style, surface.p)
        made = drive(rng, body, surface, contact_times(rng, duration), stage.size, duration)
        if made is not None:
            return Cast([made[0]], made[1])
    return Cast([])


def _swinger(rng, stage: Stage, duration: float) -> Cast:
    roll = rng.random()
    if roll < 0.2:
        return negatives.waver(rng, stage, duration)
    style = "pivot" if roll < 0.7 else "press"
    props = PIVOT_PROPS if style == "pivot" else PRESS_PROPS
    surface = PROPS[str(rng.choice(props))](rng, stage)
    body = _driven_body(rng, stage, style, surface.p)
    drive = negatives.pivot_swing if style == "pivot" else negatives.press_swing
    actor = drive(rng, body, surface, stage.size, duration)
    return Cast([actor]) if actor is not None else negatives.waver(rng, stage, duration)


def _wobbler(rng, stage: Stage, duration: float, quiet_contacts: bool = True) -> Cast:
    kinds = ["dog", "bird", "bobber", "shaker", "flapper", "talker"]
    which = str(rng.choice(kinds if quiet_contacts else kinds[:1] + kinds[2:]))
    if which == "dog":
        return gait.dog(rng, stage, floor_line(rng, stage), duration)
    if which == "bird":
        perched = perch(rng, stage) if rng.random() < 0.5 else floor_line(rng, stage)
        return gait.bird(rng, stage, perched, duration)
    if which == "bobber":
        return gait.bobber(rng, stage, duration)
    make = {"shaker": negatives.shaker, "flapper": negatives.flapper, "talker": negatives.talker}
    return make[which](rng, stage, duration)


def _distractor(rng, stage: Stage, duration: float) -> Cast:
    """Motion without contacts (not even quiet ones: a silent kind stays without contacts)."""
    which = rng.random()
    if which < 0.3:
        return _wobbler(rng, stage, duration, quiet_contacts=False)
    if which < 0.55:
        return negatives.passers(rng, stage, duration)
    if which < 0.75:
        return negatives.waver(rng, stage, duration)
    return negatives.shaker(rng, stage, duration)


def _rain(rng: np.random.Generator, size: tuple[int, int]) -> Rain:
    w, h = size
    count = int(rng.integers(30, 300))
    scale = h / 180
    return Rain(
        x=rng.uniform(-0.2 * w, 1.2 * w, count),
        y=rng.uniform(0, h, count),
        speed=rng.uniform(300, 1500, count) * scale,
        slant=rng.uniform(-0.3, 0.3),
        length=rng.uniform(2, 12) * scale,
        rgb=random_rgb(rng, 0.6, 1.0),
        opacity=rng.uniform(0.15, 0.6),
    )


def _flow(rng: np.random.Generator, stage: Stage) -> Flow:
    """A river band streaming sideways or a waterfall column streaming down."""
    w, h = stage.size
    tile = 0.5 * painted(rng, 64, 64, random_rgb(rng, 0.3, 0.9))
    tile = stage.look.apply(
        tile * (0.6 + 0.8 * pattern(rng, 64, 64, ("smooth", "stripes", "gravel")))[..., None]
    )
    speed = rng.uniform(10, 200) * h / 180
    if rng.random() < 0.6:
        y0, y1 = sorted(rng.uniform(0.2, 1.1, 2) * h)
        x0, x1 = stage.origin[0], stage.origin[0] + stage.canvas.shape[1]
        vx, vy = rng.choice([-1, 1]) * speed, 0.0
    else:
        x0, x1 = sorted(rng.uniform(0.0, 1.0, 2) * w)
        y0, y1 = stage.origin[1], stage.origin[1] + stage.canvas.shape[0]
        vx, vy = 0.0, speed * 3
    mw, mh = max(int(x1 - x0), 4), max(int(y1 - y0), 4)
    mask = np.ones((mh, mw), np.float32)
    mask[:, :2] = mask[:, -2:] = mask[:2] = mask[-2:] = 0.5
    return Flow(float(x0), float(y0), mask, tile, vx, vy)


def _light(rng: np.random.Generator, kind: str, size: tuple[int, int]) -> Light:
    w, h = size
    gain = None
    if rng.random() < 0.5:
        ramp = pattern(rng, h, w, ("gradient", "smooth"))
        gain = (1.0 + rng.uniform(-0.6, 0.4) * (ramp - 0.5)).astype(np.float32)
    flicker: tuple[tuple[float, float, float], ...] = ()
    if rng.random() < (0.5 if kind in ("wobble", "static") else 0.1):
        flicker = tuple(
            (rng.uniform(0.01, 0.12), rng.uniform(0.2, 12.0), rng.uniform(0, 6.3)) for _ in range(2)
        )
    return Light(gain, flicker)
