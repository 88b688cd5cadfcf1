"""The keypoint targets: object positions as the encoder sees the picture, and the loss that puts
one keypoint on each object."""

from __future__ import annotations

import pytest
import torch

from engines.train.keypoints import (
    PIXELS,
    grid_target,
    keypoint_error,
    keypoint_loss,
    picture_positions,
)
from engines.train.train import augment


@pytest.mark.parametrize("flip", [False, True])
def test_positions_follow_the_picture_through_flip_and_augmentation(flip: bool) -> None:
    """A bright dot drawn at a known screen position is found, after the mirror and a random
    camera, where `picture_positions` says it is."""
    size, dots = 96, [(30, 20), (70, 55), (48, 80)]  # (column, row)
    gen = torch.Generator().manual_seed(5)
    for column, row in dots:
        frames = torch.zeros(4, 1, 3, size, size)
        frames[:, :, :, row - 1 : row + 2, column - 1 : column + 2] = 1.0
        if flip:
            frames = frames.flip(-1)
        seen, scale, shift = augment(frames, 1.0, gen)
        ndc = torch.tensor([(column + 0.5) / size * 2 - 1, -((row + 0.5) / size * 2 - 1)])
        positions = picture_positions(ndc.expand(4, 1, 1, 2), torch.full((4,), flip), scale, shift)[
            :, 0, 0
        ]
        brightness = seen[:, 0].sum(dim=1).flatten(1)  # [4, H * W]
        # Less the background, which the augmentation's exposure lifts.
        brightness = (brightness - brightness.median(dim=1, keepdim=True).values).clamp(min=0)
        weight = brightness / brightness.sum(dim=1, keepdim=True)
        centre = (torch.arange(size) + 0.5) / size * 2 - 1
        found = torch.stack(
            [
                (weight * centre.repeat(size)).sum(1),
                (weight * centre.repeat_interleave(size)).sum(1),
            ],
            dim=1,
        )
        assert (PIXELS * (found - positions)).abs().max() < 0.5  # model pixels


def _keypoints(xy: list[list[tuple[float, float]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """[T][K] positions -> keypoints [1, T, K, 3] (spread 0), and maps [1, T, K, 8, 8] peaked
    where they are."""
    k = torch.tensor(xy, dtype=torch.float32)
    maps = torch.log(grid_target(k, 8, 8) + 1e-3).reshape(*k.shape[:2], 8, 8)
    return torch.cat([k, torch.zeros(*k.shape[:2], 1)], dim=-1)[None], maps[None]


def test_keypoint_loss_takes_the_cheapest_assignment_for_the_whole_crop() -> None:
    a, b, c = (0.5, 0.5), (-0.5, 0.0), (0.9, 0.9)
    positions = torch.tensor([[a, b], [a, b]])[None]  # [1, T=2, O=2, 2]
    exact = keypoint_loss(*_keypoints([[c, b, a], [c, b, a]]), positions)
    # Any order of the keypoints: the same loss.
    assert keypoint_loss(*_keypoints([[b, a, c], [b, a, c]]), positions) == exact
    # A keypoint that swaps objects mid-crop costs: the assignment holds for the crop.
    assert keypoint_loss(*_keypoints([[c, b, a], [c, a, b]]), positions) > exact + 1.0
    # One model pixel off, on one of four (object, frame) pairs, the maps unchanged: the
    # distance adds smooth L1 of 1 on one pair.
    keypoints, maps = _keypoints([[c, b, a], [c, b, a]])
    keypoints[0, 1, 2, 0] += 1 / PIXELS
    assert keypoint_loss(keypoints, maps, positions).item() == pytest.approx(exact.item() + 0.5 / 4)
    assert keypoint_error(keypoints, positions) == pytest.approx(0.0)


def test_a_map_away_from_its_object_costs() -> None:
    positions = torch.tensor([[(0.5, 0.5)]])[None]
    keypoints, on = _keypoints([[(0.5, 0.5)]])
    _, away = _keypoints([[(-0.5, -0.5)]])
    assert keypoint_loss(keypoints, away, positions) > keypoint_loss(keypoints, on, positions) + 1


def test_objects_out_of_the_picture_ask_nothing() -> None:
    nan = float("nan")
    positions = torch.tensor([[(0.2, 0.2), (1.5, 0.0)], [(0.2, 0.2), (nan, nan)]])[None]
    one = keypoint_loss(
        *_keypoints([[(0.2, 0.2), (-0.9, -0.9)], [(0.2, 0.2), (0.9, 0.9)]]), positions
    )
    other = keypoint_loss(
        *_keypoints([[(0.2, 0.2), (0.7, 0.1)], [(0.2, 0.2), (0.0, 0.3)]]), positions
    )
    assert one == other
    nowhere = torch.full((1, 2, 2, 2), nan)
    assert keypoint_loss(*_keypoints([[(0.2, 0.2)] * 2] * 2), nowhere) == 0.0


def test_the_grid_target_is_centred_on_the_position() -> None:
    rows, cols = 6, 8
    positions = torch.tensor([[0.1, -0.3], [-0.77, 0.6], [0.0, 0.0]])
    target = grid_target(positions, rows, cols)
    torch.testing.assert_close(target.sum(dim=-1), torch.ones(3))
    y = (torch.arange(rows) + 0.5) / rows * 2 - 1
    x = (torch.arange(cols) + 0.5) / cols * 2 - 1
    centres = torch.stack(torch.meshgrid(x, y, indexing="xy"), dim=-1).reshape(-1, 2)
    torch.testing.assert_close(target @ centres, positions)


def test_each_object_needs_its_own_keypoint() -> None:
    with pytest.raises(ValueError, match="keypoints"):
        keypoint_loss(*_keypoints([[(0.0, 0.0)]]), torch.zeros(1, 1, 2, 2))
