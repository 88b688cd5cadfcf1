"""Dataset and video-clip contracts: shapes, round trips, per-index determinism, exact pts."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from engines.data.clips import write_video_clip
from engines.data.dataset import (
    ASPECTS,
    IMPACT_DTYPE,
    MODEL_SIZE,
    clip_seed,
    load_clip,
    make_clip,
    render_size,
    save_clip,
    write_dataset,
)


def test_make_clip_contract() -> None:
    rec = make_clip(7, duration_s=1.0, fps=25, kind="drop")
    assert rec.frames.shape == (25, MODEL_SIZE, MODEL_SIZE, 3) and rec.frames.dtype == np.uint8
    np.testing.assert_allclose(rec.times_s, np.arange(25) / 25)
    assert rec.audio.shape == (48000,) and rec.audio.dtype == np.float32
    assert rec.impacts.dtype == IMPACT_DTYPE
    assert np.all(np.diff(rec.impacts["time_s"]) >= 0)
    assert (rec.render_width, rec.render_height) in [render_size(MODEL_SIZE, a) for a in ASPECTS]
    p = len(rec.track_material)
    assert rec.slide_speed.shape == rec.roll_speed.shape == rec.normal_force.shape == (p, 100)


def test_render_sizes_keep_the_aspect_and_even_dimensions() -> None:
    assert [render_size(64, a) for a in ASPECTS] == [(128, 72), (96, 72)]
    assert [render_size(96, a) for a in ASPECTS] == [(192, 108), (144, 108)]


def test_saved_clip_loads_identically(tmp_path: Path) -> None:
    rec = make_clip(3, duration_s=0.5, fps=24, model_width=32, model_height=32)
    save_clip(tmp_path / "c.npz", rec)
    back = load_clip(tmp_path / "c.npz")
    assert back.kind == rec.kind and back.fps == rec.fps and back.holdout is False
    for name in ("frames", "audio", "impacts", "slide_speed", "times_s"):
        assert np.array_equal(getattr(back, name), getattr(rec, name)), name


def test_dataset_clips_depend_only_on_seed_and_index(tmp_path: Path) -> None:
    paths = write_dataset(tmp_path, n_clips=2, seed=1, duration_s=0.5, fps_choices=(24,), workers=2)
    assert [p.name for p in paths] == ["clip_00000.npz", "clip_00001.npz"]
    assert (tmp_path / "manifest.json").exists()
    again = make_clip(clip_seed(1, 1, False), duration_s=0.5, fps=24)
    stored = load_clip(paths[1])
    assert np.array_equal(stored.audio, again.audio)
    assert np.array_equal(stored.frames, again.frames)
    assert clip_seed(1, 1, True) != clip_seed(1, 1, False)


def test_video_clip_has_exact_timestamps(tmp_path: Path) -> None:
    fps = Fraction(30000, 1001)
    path = tmp_path / "clip.mp4"
    clip = write_video_clip(path, seed=2, duration_s=0.5, fps=fps, width=96, height=54)
    with av.open(str(path)) as container:
        decoded = [
            (f.pts * f.time_base, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)
        ]
    assert len(decoded) == len(clip.frames) == 15
    assert [t for t, _ in decoded] == [Fraction(k) / fps for k in range(15)]
    error = np.abs(decoded[5][1].astype(float) - clip.frames[5].astype(float)).mean()
    assert error < 12  # yuv420p and crf 18 only


def test_clip_stored_without_screen_positions_replays_them(tmp_path: Path) -> None:
    rec = make_clip(3, duration_s=0.5, fps=24, model_width=32, model_height=32)
    assert rec.screen_xy.shape == (len(rec.times_s), rec.screen_xy.shape[1], 2)
    save_clip(tmp_path / "c.npz", rec)
    with np.load(tmp_path / "c.npz") as z:
        older = {k: z[k] for k in z.files if k != "screen_xy"}
    np.savez_compressed(tmp_path / "old.npz", **older)
    np.testing.assert_array_equal(load_clip(tmp_path / "old.npz").screen_xy, rec.screen_xy)
