"""Structured pruning of the generator and the visual encoder: drop whole units.

    python -m engines.export.prune CHECKPOINT OUT.pt [--keep 0.5] [--encoder-keep 1.0]

Generator: each block's pointwise MLP (width -> hidden -> width) keeps the `keep` share of its
hidden units that matter most, scored by the L2 norms of a unit's input and output weights
multiplied (a unit whose either side is small passes little); the streaming state is untouched
(it holds the blocks' inputs, not their hidden units).
Encoder: every layer of `encoder_channels` (the patch embedding and each strided convolution)
keeps the `encoder_keep` share of its channels, scored the same way: the norm of a channel's
filter times the norm of the weights that read it in the next layer (for the patch embedding,
both the frame's and the motion's; for the last convolution, the projection's columns of that
channel at every place). The encoder's state (the previous frame's embedding) narrows with it.

Whole units go, so the pruned graphs are smaller and faster as they are, with no sparse kernels.
The result is a checkpoint with `generator_expand` and `encoder_channels` lowered; fine-tune it
with `python -m engines.train.train --init-from OUT.pt`, then export it with
`python -m engines.export.onnx_export`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

import torch
from torch import nn

from engines.models.checkpoint import load_checkpoint, save_checkpoint
from engines.models.encoder import VisualEncoder
from engines.models.layers import ConvNeXtBlock

log = logging.getLogger(__name__)


def prune_block(block: ConvNeXtBlock, kept: int) -> ConvNeXtBlock:
    """The block with its `kept` most important hidden units (a new module)."""
    w1, w2 = block.pw1.weight[:, :, 0], block.pw2.weight[:, :, 0]  # (hidden, dim), (dim, hidden)
    score = w1.norm(dim=1) * w2.norm(dim=0)
    units = torch.topk(score, kept).indices.sort().values
    dim = block.pw1.in_channels
    conv = block.dwconv
    pruned = ConvNeXtBlock(dim, kept, kernel=conv.kernel_size[0], dilation=conv.dilation[0])
    with torch.no_grad():
        pruned.dwconv.load_state_dict(block.dwconv.state_dict())
        pruned.norm.load_state_dict(block.norm.state_dict())
        pruned.pw1.weight.copy_(block.pw1.weight[units])
        pruned.pw1.bias.copy_(block.pw1.bias[units])
        pruned.pw2.weight.copy_(block.pw2.weight[:, units])
        pruned.pw2.bias.copy_(block.pw2.bias)
        pruned.scale.copy_(block.scale)
    return pruned


def prune_encoder(encoder: VisualEncoder, keep: float) -> tuple[VisualEncoder, tuple[int, ...]]:
    """The encoder with the `keep` share of each layer's channels that matter most (a new
    module), and its channel widths."""
    convs = [encoder.stem, *(m for m in encoder.cnn if isinstance(m, nn.Conv2d))]
    widths = [conv.out_channels for conv in convs]
    places = encoder.proj.in_features // widths[-1]
    # How each layer's output channels are read: (next weight, its input columns per channel).
    proj = encoder.proj.weight.reshape(-1, widths[-1], places)  # flatten order: channel, place
    readers = [
        torch.cat([convs[1].weight[:, : widths[0]], convs[1].weight[:, widths[0] :]], dim=0),
        *(conv.weight for conv in convs[2:]),
        proj,
    ]
    kept = []
    for conv, reader in zip(convs, readers, strict=True):
        score = conv.weight.flatten(1).norm(dim=1) * reader.transpose(0, 1).flatten(1).norm(dim=1)
        n = max(1, round(conv.out_channels * keep))
        kept.append(torch.topk(score, n).indices.sort().values)
    channels = tuple(len(k) for k in kept)
    pruned = VisualEncoder(
        height=encoder.height, width=encoder.width, dim=encoder.dim, channels=channels
    )
    new_convs = [pruned.stem, *(m for m in pruned.cnn if isinstance(m, nn.Conv2d))]
    with torch.no_grad():
        for i, (old, new) in enumerate(zip(convs, new_convs, strict=True)):
            w = old.weight[kept[i]]
            if i == 1:  # reads the frame's embedding and the motion's, side by side
                w = torch.cat([w[:, kept[0]], w[:, widths[0] + kept[0]]], dim=1)
            elif i > 1:
                w = w[:, kept[i - 1]]
            new.weight.copy_(w)
            new.bias.copy_(old.bias[kept[i]])
        pruned.proj.weight.copy_(proj[:, kept[-1]].flatten(1))
        pruned.proj.bias.copy_(encoder.proj.bias)
        pruned.out.load_state_dict(encoder.out.state_dict())
    return pruned.eval(), channels


def prune(checkpoint: Path, out: Path, keep: float, encoder_keep: float = 1.0) -> Path:
    cfg, encoder, generator, vocoder = load_checkpoint(checkpoint)
    if not (0 < keep <= 1 and 0 < encoder_keep <= 1):
        raise ValueError("keep and encoder_keep must be in (0, 1]")
    before = {name: _size(m) for name, m in (("encoder", encoder), ("generator", generator))}
    expand = cfg.generator_expand * keep
    for blocks in (generator.blocks, generator.mel_blocks):
        for i, block in enumerate(blocks):
            kept = round(block.pw1.in_channels * expand)
            blocks[i] = prune_block(block, kept)
    channels = tuple(cfg.encoder_channels)
    if encoder_keep < 1:
        encoder, channels = prune_encoder(encoder, encoder_keep)
    pruned_cfg = dataclasses.replace(cfg, generator_expand=expand, encoder_channels=channels)
    # The pruned stages must load into the shapes their config builds.
    fresh_encoder, fresh, _ = pruned_cfg.build()
    fresh_encoder.load_state_dict(encoder.state_dict())
    fresh.load_state_dict(generator.state_dict())
    for name, m in (("encoder", fresh_encoder), ("generator", fresh)):
        log.info("%s: %d -> %d parameters", name, before[name], _size(m))
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(out, pruned_cfg, fresh_encoder, fresh, vocoder)


def _size(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--keep", type=float, default=0.5, help="share of the generator's hidden units kept"
    )
    parser.add_argument(
        "--encoder-keep", type=float, default=1.0, help="share of the encoder's channels kept"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    prune(args.checkpoint, args.out, args.keep, args.encoder_keep)


if __name__ == "__main__":
    main()
