"""Dropout for every model (models/layers/drop.py): ``fast_dropout`` keeps ``nn.Dropout``'s law with a cheaper draw
(``rand >= p``), and every model but SwarmFormer's plain oracle path draws its masks through it."""

import pytest
import torch
import torch.nn as nn

import models
from models.layers.drop import Dropout, fast_dropout


@pytest.mark.parametrize("p", [0.1, 0.4, 0.7])
def test_fast_dropout_has_nn_dropout_semantics(p):
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = fast_dropout(x, p, True)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 4e-3  # ~5 standard deviations
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    assert fast_dropout(x, p, False) is x and fast_dropout(x, 0.0, True) is x
    # the mask is fresh on every call
    assert not torch.equal(fast_dropout(x, p, True), y)


def test_fast_dropout_keep_rate_is_exact_for_bf16_activations():
    """Under autocast the activations are bf16; a bf16 uniform draw would keep 0.5985 instead of 0.6."""
    torch.manual_seed(0)
    y = fast_dropout(torch.ones(8_000_000, dtype=torch.bfloat16), 0.4, True)
    assert y.dtype == torch.bfloat16
    assert abs((y != 0).float().mean().item() - 0.6) < 6e-4  # 3.5 standard deviations


def test_the_module_is_nn_dropout_with_the_cheaper_draw():
    drop = Dropout(0.3)
    x = torch.randn(64, 128, requires_grad=True)
    torch.manual_seed(1)
    y = drop(x)
    torch.manual_seed(1)
    assert torch.equal(y, fast_dropout(x, 0.3, True))
    y.sum().backward()  # the gradient is the mask, scaled: zero where dropped, 1/(1-p) where kept
    torch.testing.assert_close(x.grad, (y != 0).float() / 0.7)
    assert drop.eval()(x) is x and repr(drop) == "Dropout(p=0.3)"
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        Dropout(1.0)


@pytest.mark.parametrize("name", models.list_models())
def test_every_model_draws_its_dropout_through_the_house_module(name):
    """nn.Dropout's draw made Longformer's train step at 1,024 tokens 1.07x slower (benchmarks/dropout_draw.py).
    SwarmFormer keeps nn.Dropout modules: its fast path reads their p into fast_dropout, its plain path (fast=False,
    the oracle of the authors' code) calls them."""
    model = models.create_model(name)
    plain = [n for n, m in model.named_modules() if type(m) is nn.Dropout]
    if type(model).__name__ == "SwarmFormer":
        assert model.cfg.fast and plain  # their p feeds fast_dropout
    else:
        assert plain == [], f"{name}: nn.Dropout at {plain}: use models.layers.drop.Dropout"
