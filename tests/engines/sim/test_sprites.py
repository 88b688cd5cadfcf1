"""Procedural 2.5-D contact clips (engines.sim.sprites): the clip contract, exact contact labels,
and which contacts are required."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from engines.sim.materials import OBJECT_MATERIALS
from engines.sim.sprites import KINDS, SpriteClip, sample_clip
from engines.sim.sprites.ballistics import fall
from engines.sim.sprites.camera import Camera
from engines.sim.sprites.generate import contacts, plan_clip
from engines.sim.sprites.kinematics import Still, Track, rot
from engines.sim.sprites.scene import Actor, Surface, gap
from engines.sim.sprites.shapes import Paint, ellipse, rasterise, rounded_rect

SMALL = (128, 72)


def _check_contract(clip: SpriteClip, size: tuple[int, int] | None = None) -> None:
    n, h, w, c = clip.frames.shape
    assert clip.frames.dtype == np.uint8 and c == 3
    assert size is None or (w, h) == size
    assert clip.times_s.dtype == np.float64 and clip.times_s.shape == (n,)
    assert clip.times_s[0] == 0.0
    assert np.all(np.diff(clip.times_s) > 0)
    assert clip.times_s[-1] < clip.duration_s
    times = [ct.time_s for ct in clip.contacts]
    assert times == sorted(times)
    assert all(0.0 <= t < clip.duration_s for t in times)
    assert all(0 < k < n for k in clip.cuts)
    assert all(ct.material is None or ct.material in OBJECT_MATERIALS for ct in clip.contacts)
    assert all(ct.speed_px_s >= 0 and ct.size_px > 0 for ct in clip.contacts)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_keeps_the_clip_contract(kind: str) -> None:
    clip = sample_clip(3, kind=kind, duration_s=2.0, size=SMALL)
    _check_contract(clip, SMALL)
    assert clip.kind == kind and clip.seed == 3
    assert clip.frames.std() > 3  # a picture, not a flat field


def test_the_same_seed_gives_the_same_clip_bit_for_bit() -> None:
    a = sample_clip(11, duration_s=2.0, size=SMALL)
    b = sample_clip(11, duration_s=2.0, size=SMALL)
    assert np.array_equal(a.frames, b.frames)
    assert np.array_equal(a.times_s, b.times_s)
    assert a.contacts == b.contacts and a.cuts == b.cuts and a.kind == b.kind
    c = sample_clip(12, duration_s=2.0, size=SMALL)
    assert not np.array_equal(a.frames, c.frames)


def test_unset_arguments_are_drawn_within_their_ranges() -> None:
    for seed in range(30):
        plan = plan_clip(seed)
        w, h = plan.delivery.size
        assert 2.0 <= plan.duration_s <= 6.0
        assert 12.0 <= plan.fps <= 60.0
        assert 160 <= max(w, h) <= 400
        assert any(abs(w / h - a) < 0.02 for a in (4 / 3, 16 / 9, 1.0, 9 / 16))
        assert plan.kind in KINDS


def test_variable_frame_times_stay_increasing_and_labels_stay_exact() -> None:
    varied = 0
    for seed in range(40):
        plan = plan_clip(seed, kind="strike", duration_s=2.0, size=SMALL, fps=25.0)
        steps = np.diff(plan.times_s)
        assert plan.times_s[0] == 0.0 and np.all(steps > 0)
        if np.ptp(steps) > 1e-9 and len(plan.shots) == 1:
            varied += 1
            # contact times come from the motion, not from the frame times
            hits = sorted(plan.shots[0].hits, key=lambda h: h.time_s)
            assert [ct.time_s for ct in contacts(plan)] == [h.time_s for h in hits]
    assert varied >= 3  # jittered or dropped frames do occur


def test_swing_clips_have_no_contacts() -> None:
    for seed in range(12):
        assert contacts(plan_clip(seed, kind="swing", duration_s=3.0)) == ()
    assert sample_clip(0, kind="swing", duration_s=2.0, size=SMALL).contacts == ()


def test_strike_contacts_are_where_the_body_touches_the_surface() -> None:
    checked = 0
    for seed in range(8):
        plan = plan_clip(seed, kind="strike", duration_s=3.0, size=(160, 90))
        for shot in plan.shots:
            for hit in shot.hits:
                g, _ = gap(hit.actor, hit.surface, hit.time_s + np.array([-3e-3, -2e-4, 0.0]))
                assert abs(g[2]) < 1e-6, "the outline meets the surface at the contact time"
                assert g[0] > 0 and g[1] > 0, "and is clear of it just before"
                checked += 1
    assert checked > 20
    clip = sample_clip(1, kind="strike", duration_s=3.0, size=(160, 90))
    assert clip.contacts and any(ct.required for ct in clip.contacts)


def test_a_dropped_disc_lands_at_the_free_fall_time() -> None:
    r, y0, floor_y, g, release = 5.0, 20.0, 150.0, 1000.0, 0.3
    floor = Surface((100.0, floor_y), (0.0, -1.0))
    _, bounces = fall(
        ellipse(0, 0, r, r), (100.0, y0), g=g, surfaces=[floor], t_end=4.0,
        release_s=release, restitution=0.6,
    )  # fmt: skip
    fall_s = np.sqrt(2 * (floor_y - r - y0) / g)
    assert bounces[0].time_s == pytest.approx(release + fall_s, abs=1e-9)
    assert bounces[0].speed_px_s == pytest.approx(g * fall_s, rel=1e-6)
    # the next flight is a parabola leaving at 0.6 of the impact speed
    assert bounces[1].time_s - bounces[0].time_s == pytest.approx(2 * 0.6 * fall_s, abs=1e-9)
    assert all(b.speed_px_s < a.speed_px_s for a, b in itertools.pairwise(bounces))


def test_a_drop_clips_first_contact_is_the_analytic_fall_time() -> None:
    found = 0
    for seed in range(40):
        plan = plan_clip(seed, kind="drop", duration_s=4.0, size=(160, 90))
        hits = sorted(plan.shots[0].hits, key=lambda h: h.time_s)
        if not hits or (plan.starts[1:] and hits[0].time_s >= plan.offsets_s[1]):
            continue
        flight = hits[0].actor.motion.phases[1]
        if flight.w != 0:  # a spinning body's reach changes as it turns: not a quadratic
            continue
        n, p = np.asarray(hits[0].surface.n), np.asarray(hits[0].surface.p)
        reach, _ = hits[0].actor.shape.support((rot(flight.th0).T @ -n)[None])
        # n . (c0 + v0 tau + a tau^2 / 2 - p) = reach
        roots = np.roots([0.5 * n @ flight.a, n @ flight.v0, n @ (flight.c0 - p) - reach[0]])
        tau = min(x.real for x in roots if abs(x.imag) < 1e-12 and x.real > 0)
        assert contacts(plan)[0].time_s == pytest.approx(flight.t0 + tau, abs=1e-8)
        found += 1
    assert found >= 3


def test_drop_contacts_touch_and_late_small_bounces_are_not_required() -> None:
    quiet = 0
    for seed in range(10):
        plan = plan_clip(seed, kind="drop", duration_s=4.0, size=(160, 90))
        for shot in plan.shots:
            for hit in shot.hits:
                g, _ = gap(hit.actor, hit.surface, hit.time_s + np.array([-1e-3, 0.0]))
                assert g[0] > 0 and abs(g[1]) < 1e-6
        quiet += sum(not ct.required for ct in contacts(plan))
    assert quiet > 0


def test_a_cut_is_not_a_contact() -> None:
    cut = 0
    for seed in range(60):
        plan = plan_clip(seed, kind="static", duration_s=2.0, size=SMALL)
        if len(plan.starts) > 1:
            clip = sample_clip(seed, kind="static", duration_s=2.0, size=SMALL)
            assert clip.cuts == plan.starts[1:] and clip.contacts == ()
            cut += 1
        if cut == 2:
            break
    assert cut == 2


def test_contacts_across_a_cut_are_not_required() -> None:
    for seed in range(80):
        plan = plan_clip(seed, kind="drop", duration_s=3.0, size=SMALL)
        for k in plan.starts[1:]:
            t0, t1 = plan.times_s[k - 1], plan.times_s[k]
            assert not any(ct.required for ct in contacts(plan) if t0 <= ct.time_s < t1)


def test_contacts_outside_the_picture_are_not_required() -> None:
    outside = 0
    for seed in range(40):
        plan = plan_clip(seed, kind=("drop", "strike")[seed % 2], duration_s=3.0)
        x0, y0, pw, ph = plan.delivery.picture
        for ct in contacts(plan):
            x, y = ct.xy
            if not (x0 <= x <= x0 + pw - 1 and y0 <= y <= y0 + ph - 1):
                assert not ct.required
                outside += 1
    assert outside > 0
    # the same contacts, with the camera turned away from them
    plan = plan_clip(1, kind="strike", duration_s=3.0, size=(160, 90))
    assert any(ct.required for ct in contacts(plan))
    shot = plan.shots[0]
    away = Track(0, 10_000.0)
    shot.camera = dataclasses.replace(shot.camera, pan_x=away)
    assert not any(ct.required for ct in contacts(plan))


def test_a_contact_hidden_behind_a_body_in_front_is_not_required() -> None:
    plan = plan_clip(1, kind="strike", duration_s=3.0, size=(160, 90))
    shot = plan.shots[0]
    first = next(ct for ct in contacts(plan) if ct.required)
    hit = next(h for h in shot.hits if abs(h.time_s - first.time_s) < 1e-9)
    _, point = gap(hit.actor, hit.surface, np.array([hit.time_s]))
    board = rounded_rect(-30, -30, 30, 30)
    sprite = rasterise([(board, Paint((0.5, 0.5, 0.5)))])
    shot.actors.append(Actor(board, sprite, Still(*point[0])))
    assert not next(ct for ct in contacts(plan) if abs(ct.time_s - first.time_s) < 1e-9).required


def test_a_still_camera_maps_scene_to_picture_unchanged() -> None:
    cam = Camera((79.5, 44.5), Track(0, 0), Track(0, 0), Track(0, 1), Track(0, 0))
    assert np.allclose(cam.to_picture(np.array([[3.0, 7.0]]), 1.0), [[3.0, 7.0]])
    assert not cam.moving
