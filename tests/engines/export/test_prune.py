"""Structured pruning keeps the stage contract, and keeping every unit changes nothing."""

from __future__ import annotations

import torch

from engines.export.prune import prune
from engines.models.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import tiny_model


def tiny_checkpoint(path):
    torch.manual_seed(0)
    encoder, generator, vocoder = tiny_model().build()
    return save_checkpoint(path, tiny_model(), encoder, generator, vocoder)


def generate(generator, features):
    with torch.no_grad():
        return generator(features)[0]


def test_pruning_halves_the_hidden_units_and_keeps_shapes(tmp_path):
    source = tiny_checkpoint(tmp_path / "tiny.pt")
    pruned = prune(source, tmp_path / "pruned.pt", keep=0.5)
    cfg, _, generator, _ = load_checkpoint(pruned)
    _, _, original, _ = load_checkpoint(source)
    assert cfg.generator_expand == tiny_model().generator_expand * 0.5
    for block, before in zip(generator.blocks, original.blocks, strict=True):
        assert block.pw1.out_channels == before.pw1.out_channels // 2
    assert sum(p.numel() for p in generator.parameters()) < sum(
        p.numel() for p in original.parameters()
    )
    features = torch.randn(1, 12, tiny_model().feature_dim)
    assert generate(generator, features).shape == generate(original, features).shape


def test_keeping_every_unit_is_the_same_model(tmp_path):
    source = tiny_checkpoint(tmp_path / "tiny.pt")
    same = prune(source, tmp_path / "same.pt", keep=1.0)
    features = torch.randn(1, 12, tiny_model().feature_dim)
    before = generate(load_checkpoint(source)[2], features)
    after = generate(load_checkpoint(same)[2], features)
    assert torch.allclose(before, after, atol=1e-6)


def test_encoder_pruning_narrows_every_layer_and_keeps_the_contract(tmp_path):
    source = tiny_checkpoint(tmp_path / "tiny.pt")
    pruned = prune(source, tmp_path / "pruned.pt", keep=1.0, encoder_keep=0.5)
    cfg, encoder, _, _ = load_checkpoint(pruned)
    _, original, _, _ = load_checkpoint(source)
    assert cfg.encoder_channels == tuple(c // 2 for c in tiny_model().encoder_channels)
    frames, age = torch.rand(1, 5, 3, cfg.height, cfg.width), torch.zeros(1, 5)
    with torch.no_grad():
        assert encoder(frames, age).shape == original(frames, age).shape
    state = encoder.initial_state(1)
    assert state["before"].shape[1] == cfg.encoder_channels[0]  # the state narrows too


def test_keeping_every_encoder_channel_is_the_same_encoder(tmp_path):
    source = tiny_checkpoint(tmp_path / "tiny.pt")
    same = prune(source, tmp_path / "same.pt", keep=1.0, encoder_keep=1.0 - 1e-9)
    frames, age = torch.rand(1, 5, 3, tiny_model().height, tiny_model().width), torch.rand(1, 5)
    with torch.no_grad():
        before = load_checkpoint(source)[1](frames, age)
        after = load_checkpoint(same)[1](frames, age)
    torch.testing.assert_close(after, before)


def test_encoder_pruning_drops_the_channels_that_pass_the_least(tmp_path):
    """A patch-embedding channel whose filter is zero passes nothing: it is the one dropped."""
    torch.manual_seed(0)
    encoder, generator, vocoder = tiny_model().build()
    n = tiny_model().encoder_channels[0]
    with torch.no_grad():
        encoder.stem.weight[3].zero_()
    source = save_checkpoint(tmp_path / "tiny.pt", tiny_model(), encoder, generator, vocoder)
    pruned = prune(source, tmp_path / "p.pt", keep=1.0, encoder_keep=(n - 1) / n)
    _, narrow, _, _ = load_checkpoint(pruned)
    rest = [c for c in range(n) if c != 3]
    torch.testing.assert_close(narrow.stem.weight, encoder.stem.weight[rest])
