"""The contact head: a window of motion maps -> per place, whether a contact happens in the
decided interval, when inside it, how hard and of what.

    ContactHead.forward(x [B, WINDOW * CHANNELS, h, w]) -> dict of [B, ., h2, w2] maps:
        logit     [B, 1]           contact in this cell during the interval (sigmoid: probability)
        u         [B, 1]           when, as a fraction of the interval (sigmoid: in [0, 1])
        strength  [B, 1]           the contact's log strength
        material  [B, M]           material logits

with h2, w2 = ceil(h / 2), ceil(w / 2): a cell is 2 x 2 of the input's blocks (8 x 8 picture
pixels). Fully convolutional, so any picture size runs; the receptive field (about 80 picture
pixels) covers a body's approach and what it meets.
"""

from __future__ import annotations

import torch
from torch import nn

from service.pipeline.motion.window import CHANNELS, WINDOW


def _conv(cin: int, cout: int, *, stride: int = 1, dilation: int = 1) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=dilation, dilation=dilation),
        nn.ReLU(inplace=True),
    )


class ContactHead(nn.Module):
    def __init__(self, width: int = 48, materials: int = 7) -> None:
        super().__init__()
        self.config = {"width": width, "materials": materials}
        self.body = nn.Sequential(
            _conv(WINDOW * CHANNELS, 32, stride=2),
            _conv(32, width),
            _conv(width, width, dilation=2),
            _conv(width, width),
        )
        self.out = nn.Conv2d(width, 3 + materials, 1)
        with torch.no_grad():  # contacts are rare: start from a low prior (focal-loss practice)
            self.out.bias.zero_()
            self.out.bias[0] = -4.0

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.out(self.body(x))
        return {
            "logit": y[:, 0:1],
            "u": torch.sigmoid(y[:, 1:2]),
            "strength": y[:, 2:3],
            "material": y[:, 3:],
        }
