"""The contact head's training side: features through the service's preprocessing, targets,
a resumable training run and the export the service loads."""

from __future__ import annotations

import numpy as np
import pytest

from engines.motion import data, train
from engines.motion.evaluate import feature_events, load_model, torch_head
from engines.motion.features import (
    CONTACT_FIELDS,
    HEIGHT,
    WIDTH,
    ClipFeatures,
    Contact,
    clip_features,
    letterbox_map,
)
from engines.motion.targets import targets
from service.pipeline.motion.flow import FACTOR
from service.pipeline.motion.window import CHANNELS


def moving_disc(n: int = 12, size: tuple[int, int] = (240, 180)) -> np.ndarray:
    w, h = size
    frames = np.full((n, h, w, 3), 90, np.uint8)
    for k in range(n):
        x = 40 + 8 * k
        frames[k, 80:100, x : x + 20] = 230
    return frames


def test_letterboxing_puts_a_4_3_picture_in_the_middle():
    scale, left, top = letterbox_map(240, 180)
    assert (scale, left, top) == (1.0, 40, 0)
    scale, left, top = letterbox_map(640, 360)
    assert (scale, left, top) == (0.5, 0, 0)


def test_features_hold_every_interval_and_contacts_in_picture_pixels(tmp_path):
    times = np.arange(12) / 24.0
    contact = Contact(time_s=0.2, xy=(100.0, 90.0), strength=2.0, material="wood", required=True)
    f = clip_features(moving_disc(), times, (6,), [contact])
    assert f.x.shape == (11, CHANNELS, HEIGHT // FACTOR, WIDTH // FACTOR)
    assert f.valid.tolist() == [True] * 5 + [False] + [True] * 5  # the cut at frame 6
    assert f.shot.tolist() == [0] * 5 + [1] * 6
    row = dict(zip(CONTACT_FIELDS, f.contacts[0], strict=True))
    assert row["interval"] == 4  # 0.2 s lies in [4/24, 5/24)
    assert row["u"] == pytest.approx((0.2 - 4 / 24) * 24)
    assert (row["x"], row["y"]) == (140.0, 90.0)  # 40 px of pillarbox to the left
    f.save(tmp_path / "000000.npz")
    back = ClipFeatures.load(tmp_path / "000000.npz")
    np.testing.assert_array_equal(back.x, f.x)
    np.testing.assert_array_equal(back.contacts, f.contacts)


def clip_with(rows: list[tuple]) -> ClipFeatures:
    n = 6
    return ClipFeatures(
        x=np.zeros((n, CHANNELS, 8, 12), np.float16),
        valid=np.ones(n, bool),
        shot=np.zeros(n, int),
        start_s=np.arange(n) / 30,
        end_s=(np.arange(n) + 1) / 30,
        contacts=np.array(rows, np.float64).reshape(-1, len(CONTACT_FIELDS)),
    )


def test_a_required_contact_is_a_peak_at_its_cell_with_its_time():
    t = targets(clip_with([(2, 41.0, 17.0, 0.3, 1.5, 2, 1.0)]), 2, 4, 6)
    assert t.peak[2, 5] and t.peak.sum() == 1  # 41 // 8, 17 // 8
    assert t.heat[2, 5] == 1.0 and 0 < t.heat[2, 4] < 1
    assert t.u[2, 5] == pytest.approx(0.3) and t.material[2, 5] == 2
    assert t.mask.min() == 1.0


def test_contacts_not_taught_are_left_out_of_the_loss():
    quiet = targets(clip_with([(2, 41.0, 17.0, 0.3, 1.5, -1, 0.0)]), 2, 4, 6)
    assert not quiet.peak.any() and quiet.mask[2, 5] == 0.0
    # a contact near the frame shared with the next interval is not punished there either
    edge = targets(clip_with([(2, 41.0, 17.0, 0.95, 1.5, -1, 1.0)]), 3, 4, 6)
    assert not edge.peak.any() and edge.mask[2, 5] == 0.0
    middle = targets(clip_with([(2, 41.0, 17.0, 0.5, 1.5, -1, 1.0)]), 3, 4, 6)
    assert middle.mask.min() == 1.0


@pytest.fixture(scope="module")
def sprite_set(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sprites")
    data.build("sprites", folder, range(3), workers=1)
    return folder


def test_training_resumes_where_it_stopped_and_its_head_runs(sprite_set, tmp_path):
    out = tmp_path / "head.pt"
    common = ["--data", str(sprite_set), "--out", str(out), "--batch", "4", "--width", "8"]
    train.main([*common, "--steps", "20", "--save-every", "10"])
    first = load_model(out)
    train.main([*common, "--steps", "30", "--save-every", "10"])
    import torch

    assert torch.load(out, map_location="cpu")["step"] == 30
    second = load_model(out)
    assert any(
        not torch.equal(a, b)
        for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    )
    clip = data.load_dir(sprite_set)[0]
    fired = feature_events(clip, torch_head(second), threshold=0.0)
    assert np.all(np.diff(fired) >= 0)
