"""The generator's onset heads: where events fire, and what the onset output means."""

from __future__ import annotations

import torch

from engines.models.encoder import VisualEncoder
from tests.conftest import tiny_model


def _generator():
    _, generator, _ = tiny_model().build()
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
    features = torch.randn(2, 12, tiny_model().feature_dim)
    with torch.no_grad():
        x, onset_logit, offset_logit = generator.heads(features)
        _, onset = generator.render(x, onset_logit, offset_logit)
    per_frame = onset.reshape(2, 12, generator.r).sum(dim=-1)
    torch.testing.assert_close(per_frame, torch.sigmoid(onset_logit))


def test_encoder_feature_sees_its_frame_and_left_context_before() -> None:
    torch.manual_seed(0)
    encoder = VisualEncoder(height=64, width=64, dim=8).eval()
    n, changed_frame = 10, 3
    frames, age = torch.rand(1, n, 3, 64, 64), torch.zeros(1, n)
    changed = frames.clone()
    changed[0, changed_frame] = torch.rand(3, 64, 64)
    with torch.no_grad():
        a, b = encoder(frames, age), encoder(changed, age)
    differs = (a - b).abs().amax(dim=-1)[0] > 1e-6
    seen_by = range(changed_frame, changed_frame + encoder.left_context + 1)
    assert differs.tolist() == [t in seen_by for t in range(n)]


def test_encoder_streams() -> None:
    torch.manual_seed(0)
    encoder = VisualEncoder(height=64, width=64, dim=8).eval()
    frames, age = torch.rand(1, 7, 3, 64, 64), torch.rand(1, 7)
    with torch.no_grad():
        whole = encoder(frames, age)
        first, state = encoder.step(frames[:, :3], age[:, :3], encoder.initial_state())
        rest, _ = encoder.step(frames[:, 3:], age[:, 3:], state)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole)
