"""Structured pruning of the generator: drop hidden units of its ConvNeXt MLPs.

    python -m engines.export.prune CHECKPOINT OUT.pt [--keep 0.5]

Each block's pointwise MLP (width -> hidden -> width) keeps the `keep` share of its hidden units
that matter most, scored by the L2 norms of a unit's input and output weights multiplied (a
unit whose either side is small passes little). Whole units go, so the pruned graph is smaller
and faster as it is, with no sparse kernels; the streaming state is untouched (it holds the
blocks' inputs, not their hidden units). The result is a checkpoint with `generator_expand`
lowered; fine-tune it with `python -m engines.train.train --init-from OUT.pt`, then export it with
`python -m engines.export.onnx_export`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

import torch

from engines.models.checkpoint import load_checkpoint, save_checkpoint
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


def prune(checkpoint: Path, out: Path, keep: float) -> Path:
    cfg, encoder, generator, vocoder = load_checkpoint(checkpoint)
    if not 0 < keep <= 1:
        raise ValueError("keep must be in (0, 1]")
    expand = cfg.generator_expand * keep
    for blocks in (generator.blocks, generator.mel_blocks):
        for i, block in enumerate(blocks):
            kept = round(block.pw1.in_channels * expand)
            blocks[i] = prune_block(block, kept)
    pruned_cfg = dataclasses.replace(cfg, generator_expand=expand)
    # The pruned generator must load into the shapes its config builds.
    _, fresh, _ = pruned_cfg.build()
    fresh.load_state_dict(generator.state_dict())
    before = sum(p.numel() for p in load_checkpoint(checkpoint)[2].parameters())
    after = sum(p.numel() for p in fresh.parameters())
    log.info("generator: %d -> %d parameters (keep %.2f of hidden units)", before, after, keep)
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(out, pruned_cfg, encoder, fresh, vocoder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep", type=float, default=0.5, help="share of hidden units kept")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    prune(args.checkpoint, args.out, args.keep)


if __name__ == "__main__":
    main()
