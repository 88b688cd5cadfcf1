"""The generator's onset heads: where events fire, and what the onset output means."""

from __future__ import annotations

import pytest
import torch

from engines.models.encoder import VisualEncoder
from tests.conftest import TINY_MODEL


def _generator():
    _, generator, _ = TINY_MODEL.build()
    return generator.eval()


def test_events_fire_once_per_rise_on_the_most_likely_subframe() -> None:
    generator = _generator()
    r = generator.r
    # Frame probabilities: below, above, above, below, above (two rises: frames 1 and 4).
    onset_logit = torch.tensor([[-3.0, 2.0, 3.0, -3.0, 1.0]])
    offset_logit = torch.full((1, r, 5), -1.0)
    offset_logit[0, 2, 1] = 4.0  # frame 1 -> sub-frame 2
    offset_logit[0, r - 1, 4] = 4.0  # frame 4 -> last sub-frame
    offset_logit[0, 0, 2] = 4.0  # frame 2 stays above the trigger: no second event
    events = generator.fire(onset_logit, offset_logit)[0]
    assert torch.nonzero(events).flatten().tolist() == [1 * r + 2, 4 * r + r - 1]


def test_onset_output_is_a_probability_per_acoustic_frame() -> None:
    generator = _generator()
    features = torch.randn(2, 12, TINY_MODEL.feature_dim)
    with torch.no_grad():
        x, onset_logit, offset_logit = generator.heads(features)
        _, onset = generator.render(x, onset_logit, offset_logit)
    per_frame = onset.reshape(2, 12, generator.r).sum(dim=-1)
    torch.testing.assert_close(per_frame, torch.sigmoid(onset_logit))


def _encoder(glimpses: int, materials: int = 0, keypoints: int = 0) -> VisualEncoder:
    encoder = VisualEncoder(
        height=64, width=64, dim=8, glimpses=glimpses, materials=materials, keypoints=keypoints
    ).eval()
    if glimpses:  # they start at zero: make them count
        torch.nn.init.normal_(encoder.glimpse.weight)
    if materials:
        torch.nn.init.normal_(encoder.material_in.weight)
    if keypoints:
        torch.nn.init.normal_(encoder.keypoint_in.weight)
    return encoder


@pytest.mark.parametrize(
    ("glimpses", "materials", "keypoints"), [(0, 0, 0), (2, 0, 0), (2, 3, 0), (0, 0, 2)]
)
def test_encoder_feature_sees_its_frame_and_left_context_before(
    glimpses: int, materials: int, keypoints: int
) -> None:
    torch.manual_seed(0)
    encoder = _encoder(glimpses, materials, keypoints)
    n, changed_frame = 10, 3
    frames, age = torch.rand(1, n, 3, 64, 64), torch.zeros(1, n)
    changed = frames.clone()
    changed[0, changed_frame] = torch.rand(3, 64, 64)
    with torch.no_grad():
        a, b = encoder(frames, age), encoder(changed, age)
    differs = (a - b).abs().amax(dim=-1)[0] > 1e-6
    seen_by = range(changed_frame, changed_frame + encoder.left_context + 1)
    assert differs.tolist() == [t in seen_by for t in range(n)]


@pytest.mark.parametrize(("materials", "keypoints"), [(0, 0), (3, 0), (0, 2)])
def test_encoder_streams_with_glimpses_and_keypoints(materials: int, keypoints: int) -> None:
    torch.manual_seed(0)
    encoder = _encoder(2, materials, keypoints)
    frames, age = torch.rand(1, 7, 3, 64, 64), torch.rand(1, 7)
    with torch.no_grad():
        whole = encoder(frames, age)
        first, state = encoder.step(frames[:, :3], age[:, :3], encoder.initial_state())
        rest, _ = encoder.step(frames[:, 3:], age[:, 3:], state)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole)


def test_glimpses_added_to_a_trained_encoder_start_where_it_was() -> None:
    torch.manual_seed(0)
    before = VisualEncoder(height=64, width=64, dim=8).eval()
    after = VisualEncoder(height=64, width=64, dim=8, glimpses=2).eval()
    missing = after.load_state_dict(before.state_dict(), strict=False).missing_keys
    assert sorted(missing) == ["attend.bias", "attend.weight", "glimpse.bias", "glimpse.weight"]
    frames, age = torch.rand(1, 5, 3, 64, 64), torch.zeros(1, 5)
    with torch.no_grad():
        torch.testing.assert_close(after(frames, age), before(frames, age))


def test_materials_added_to_an_encoder_with_glimpses_start_where_it_was() -> None:
    torch.manual_seed(0)
    before = _encoder(2)
    after = VisualEncoder(height=64, width=64, dim=8, glimpses=2, materials=3).eval()
    missing = after.load_state_dict(before.state_dict(), strict=False).missing_keys
    assert sorted(missing) == [
        "material.bias",
        "material.weight",
        "material_in.bias",
        "material_in.weight",
    ]
    frames, age = torch.rand(1, 5, 3, 64, 64), torch.zeros(1, 5)
    with torch.no_grad():
        features, materials = after.encode(frames, age)[:2]
        torch.testing.assert_close(features, before(frames, age))
    assert materials is not None and materials.shape == (1, 5, 2, 3)  # object, other
    assert before.encode(frames, age).materials is None


def test_materials_need_glimpses() -> None:
    with pytest.raises(ValueError, match="glimpses"):
        VisualEncoder(height=64, width=64, dim=8, materials=3)


def test_keypoints_added_to_a_trained_encoder_start_where_it_was() -> None:
    torch.manual_seed(0)
    before = VisualEncoder(height=64, width=64, dim=8).eval()
    after = VisualEncoder(height=64, width=64, dim=8, keypoints=2).eval()
    missing = after.load_state_dict(before.state_dict(), strict=False).missing_keys
    assert all(k.startswith(("locate.", "keypoint_in.")) for k in missing)
    frames, age = torch.rand(1, 5, 3, 64, 64), torch.zeros(1, 5)
    with torch.no_grad():
        encoded = after.encode(frames, age)
        torch.testing.assert_close(encoded.features, before(frames, age))
    assert encoded.keypoints is not None and encoded.keypoints.shape == (1, 5, 2, 3)
    assert before.encode(frames, age).keypoints is None


def test_a_keypoint_is_the_soft_arg_max_of_its_map() -> None:
    """A map peaked on one patch gives that patch's centre, finer than a patch when two share
    the peak, with the spread of the attention behind it."""
    encoder = VisualEncoder(height=64, width=64, dim=8, keypoints=2).eval()  # a 16x16 patch grid
    bias = torch.zeros(2, 16, 16)
    bias[0, 3, 12] = 60.0  # row 3, column 12
    bias[1, 8, 4:6] = 60.0  # row 8, columns 4 and 5: between them
    encoder.locate[-1] = _PlaceBias(bias)  # the same maps whatever the picture
    with torch.no_grad():
        keypoints = encoder.encode(torch.rand(1, 2, 3, 64, 64), torch.zeros(1, 2)).keypoints
    assert keypoints is not None
    centre = lambda i: (i + 0.5) / 16 * 2 - 1  # noqa: E731
    torch.testing.assert_close(keypoints[0, 0, 0, :2], torch.tensor([centre(12), centre(3)]))
    torch.testing.assert_close(keypoints[0, 0, 1, :2], torch.tensor([centre(4.5), centre(8)]))
    spread = keypoints[0, 0, :, 2]
    assert spread[0] < 1e-6 and spread[1] == pytest.approx((1 / 16) ** 2, rel=1e-4)


class _PlaceBias(torch.nn.Module):
    def __init__(self, bias: torch.Tensor) -> None:
        super().__init__()
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bias.expand(x.shape[0], *self.bias.shape)
