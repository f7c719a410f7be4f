"""SWARM Transformer (models/swarm_transformer.py): shapes, sub-pixel order, causality, class conditioning,
gradients, and incremental sampling against the naive oracle."""

from __future__ import annotations

import math

import pytest
import torch

import models
from models.swarm_transformer import location_features_2d

SIZES = [(1, 4, 4), (3, 3, 3)]


def tiny(image_size, **kw):
    torch.manual_seed(0)
    model = models.create_model("swarm_transformer_base", image_size=image_size, dim=8, dim_hidden=8, n_iter=3, **kw)
    if model.channel_embedding is not None:  # starts at 0 (as the authors'); make the channels differ
        torch.nn.init.normal_(model.channel_embedding)
    return model.eval()


def pixels(B, size, seed):
    return torch.randint(0, 256, (B, *size), generator=torch.Generator().manual_seed(seed))


def test_registered_defaults():
    assert {"swarm_transformer_base", "swarm_transformer_small"} <= set(models.list_models(kind="image"))
    cfg = models.create_model("swarm_transformer_base").cfg
    assert (cfg.image_size, cfg.dim, cfg.dim_hidden, cfg.n_iter, cfg.num_layers) == ((1, 28, 28), 256, 256, 10, 1)
    small = models.create_model("swarm_transformer_small").cfg
    assert (small.dim, small.dim_hidden, small.n_iter) == (64, 64, 4)
    with pytest.raises(ValueError, match="multiple of 4"):
        models.create_model("swarm_transformer_base", dim=30)


@pytest.mark.parametrize("size", SIZES)
def test_shapes(size):
    model = tiny(size)
    x = pixels(2, size, 0)
    assert model(x, torch.tensor([3, 4])).shape == (2, 256, *size)
    assert model(x).shape == (2, 256, *size)
    with pytest.raises(ValueError, match="pixels must be"):
        model(pixels(2, (size[0], 5, 5), 0))


def test_sub_pixel_order_is_raster_with_channels_consecutive():
    model = tiny((3, 2, 2))
    x = torch.arange(12).view(1, 2, 2, 3).permute(0, 3, 1, 2)  # value = (h * W + w) * C + c
    assert model.to_sequence(x).tolist() == [list(range(12))]
    torch.testing.assert_close(model.from_sequence(model.to_sequence(x)), x)
    model = tiny((3, 2, 4))  # position l = (h, w, c) gets P[h, w] + E_ch[c]
    terms = model.position_terms()
    for h, w, c in ((0, 0, 0), (1, 2, 1), (1, 3, 2)):
        expected = location_features_2d(2, 4, 8)[h, w] + model.channel_embedding[c]
        torch.testing.assert_close(terms[(h * 4 + w) * 3 + c], expected)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("num_layers", [1, 2])
def test_logits_at_a_sub_pixel_ignore_it_and_everything_after(size, num_layers):
    model = tiny(size, num_layers=num_layers)
    x, labels = pixels(2, size, 1), torch.tensor([0, 9])
    seq = model.to_sequence(x)
    flat = lambda px: model(px, labels).permute(0, 3, 4, 2, 1).reshape(2, -1, 256)  # (B, L, 256)
    base = flat(x)
    L = seq.shape[1]
    for l in range(L):
        changed = seq.clone()
        changed[:, l:] = torch.randint(0, 256, (2, L - l), generator=torch.Generator().manual_seed(l))
        out = flat(model.from_sequence(changed))
        torch.testing.assert_close(out[:, : l + 1], base[:, : l + 1], rtol=0, atol=1e-6)
        if l + 1 < L:  # sub-pixel l does reach l + 1: the test can fail
            assert not torch.allclose(out[:, l + 1], base[:, l + 1])


def test_class_conditioning_changes_logits():
    model = tiny((1, 4, 4))
    x = pixels(2, (1, 4, 4), 2)
    a, b, none = model(x, torch.tensor([1, 1])), model(x, torch.tensor([2, 2])), model(x)
    assert (a - b).abs().max() > 1e-4 and (a - none).abs().max() > 1e-4
    with pytest.raises(ValueError, match="num_classes=0"):
        tiny((1, 4, 4), num_classes=0)(x, torch.tensor([1, 1]))


@pytest.mark.parametrize("size", SIZES)
def test_every_parameter_gets_a_gradient(size):
    model = tiny(size, num_layers=2).train()
    x = pixels(3, size, 3)
    logits = model(x, torch.tensor([0, 5, 9]))
    torch.nn.functional.cross_entropy(logits, x).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("labels", [torch.tensor([0, 3, 8]), None])
def test_incremental_logits_equal_the_full_forward(size, labels):
    model = tiny(size, num_layers=2)
    x = pixels(3, size, 4)
    torch.testing.assert_close(model.incremental_logits(x, labels), model(x, labels), rtol=0, atol=1e-5)


@pytest.mark.parametrize("size", SIZES)
def test_incremental_samples_equal_naive_samples(size):
    model = tiny(size, num_layers=2)
    labels = torch.tensor([0, 3, 8])
    fast = model.sample(labels, generator=torch.Generator().manual_seed(7), temperature=1.5)
    naive = model.sample_naive(labels, generator=torch.Generator().manual_seed(7), temperature=1.5)
    assert fast.shape == (3, *size) and fast.dtype == torch.long
    assert torch.equal(fast, naive)
    other = model.sample(labels, generator=torch.Generator().manual_seed(8), temperature=1.5)
    assert not torch.equal(fast, other)  # the seed matters: the equality above is not vacuous
    unconditional = model.sample(None, num_samples=2, generator=torch.Generator().manual_seed(7))
    assert torch.equal(
        unconditional, model.sample_naive(None, num_samples=2, generator=torch.Generator().manual_seed(7))
    )
    assert model.training is False


def test_sampling_restores_training_mode():
    model = tiny((1, 2, 2), dropout=0.5).train()
    model.sample(torch.tensor([1]), generator=torch.Generator().manual_seed(0))
    assert model.training


def test_fast_and_plain_paths_agree():
    fast, plain = tiny((3, 3, 3)), tiny((3, 3, 3), fast=False)
    plain.load_state_dict(fast.state_dict())
    x = pixels(2, (3, 3, 3), 5)
    torch.testing.assert_close(fast(x, torch.tensor([1, 2])), plain(x, torch.tensor([1, 2])), rtol=0, atol=1e-5)


def test_location_features_are_the_authors():
    H, W, D = 3, 5, 8  # two frequencies: 1 and max(H, W) / 2 = 2.5 cycles per W pixels
    f = location_features_2d(H, W, D)
    assert f.shape == (H, W, D)
    y, x = 2, 3
    for k, freq in enumerate((1.0, 2.5)):
        expected = [
            math.sin(2 * math.pi * freq * x / W),
            math.sin(2 * math.pi * freq * y / W),
            math.cos(2 * math.pi * freq * x / W),
            math.cos(2 * math.pi * freq * y / W),
        ]
        torch.testing.assert_close(f[y, x, 4 * k : 4 * k + 4], torch.tensor(expected), rtol=0, atol=1e-6)
