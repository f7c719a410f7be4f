"""HSW: patch merging and its mask, stage lengths, padding invariance at 4096 tokens, configuration errors.

Forward / backward / gradient and short-sequence padding checks of every registered model (hsw_base, hsw_small
included) are in tests/models/test_model_zoo.py.
"""

from __future__ import annotations

import pytest
import torch

import models
from models.hsw import HSWConfig, PatchMerging

# hsw_small's structure (4 stages, depths 1/1/2/1, W = 128) at a width that keeps a 4096-token forward fast
TINY_WIDTH = dict(d_model=8, heads=(1, 1, 2, 2), embed_dim=8, vocab_size=50, num_classes=3)


def test_patch_merging_shapes_and_mask_propagation():
    torch.manual_seed(0)
    merge = PatchMerging(6)
    x = torch.randn(2, 12, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0]], dtype=torch.bool)
    out, merged = merge(x, mask)
    assert out.shape == (2, 3, 12)  # (B, L/4, 2C)
    assert merged.tolist() == [[True, True, False], [True, False, True]]  # real iff any of its 4 tokens is
    # what PAD positions hold does not matter: they merge as zeros
    garbage = torch.where(mask[..., None], x, 100 * torch.randn_like(x))
    torch.testing.assert_close(merge(garbage, mask)[0], out)
    # token i of the merged sequence is tokens 4i..4i+3, in order
    y = torch.zeros(1, 8, 6)
    y[0, 5] = 1.0  # second group, second position
    manual = merge.reduction(merge.norm(y.view(1, 2, 24)))
    torch.testing.assert_close(merge(y, None)[0], manual)
    assert merge(y, None)[1] is None
    with pytest.raises(ValueError, match="divisible by 4"):
        merge(torch.randn(1, 6, 6), None)


def test_seed_sizes_and_4096_tokens_become_64():
    cfg = models.create_model("hsw_base").cfg
    assert (cfg.stage_dims, cfg.depths, cfg.heads, cfg.window, cfg.seq_len) == (
        [96, 192, 384, 768],
        (2, 2, 6, 2),
        (3, 6, 12, 24),
        128,
        4096,
    )
    model = models.create_model("hsw_base", **{**TINY_WIDTH, "heads": (1, 1, 1, 1)}).eval()
    x = model.patch_embed(model.tok_emb(torch.randint(0, 50, (1, 4096))))
    mask = torch.ones(1, 4096, dtype=torch.bool)
    for stage in model.stages[:3]:
        x, mask = stage(x, mask)
    assert x.shape == (1, 64, 8 * 8) and mask.all()  # 4096 -> 1024 -> 256 -> 64 tokens
    shifts = [[b.attn.shift for b in stage.blocks] for stage in model.stages]
    assert shifts == [[0, 64], [0, 64], [0, 64, 0, 64, 0, 64], [0, 64]]  # plain / shifted alternate


def test_hsw_small_sizes():
    cfg = models.create_model("hsw_small").cfg
    assert (cfg.stage_dims, cfg.depths, cfg.window) == ([64, 128, 256, 512], (1, 1, 2, 1), 128)


@pytest.mark.parametrize("real", [4096, 2500, 700])
def test_padding_invariance_at_4096_tokens(real):
    """Eval mode: the same text alone, or padded to 4096 with PAD or with garbage under the mask, in a batch
    with a full-length sample, gives the same logits (1e-5)."""
    torch.manual_seed(0)
    model = models.create_model("hsw_small", **TINY_WIDTH).eval()
    for p in model.parameters():  # O(1) weights, so that a leak would be far above rounding
        torch.nn.init.normal_(p, std=0.3)
    g = torch.Generator().manual_seed(real)
    L = 4096
    ids = torch.randint(3, 50, (2, L), generator=g)
    mask = torch.ones(2, L, dtype=torch.bool)
    mask[0, real:] = False
    padded = ids.masked_fill(~mask, 0)
    with torch.no_grad():
        alone = model(ids[:1, :real], torch.ones(1, real, dtype=torch.bool))
        alone_no_mask = model(ids[:1, :real])
        batch = model(padded, mask)
        garbage = model(ids, mask)  # real ids (not PAD) under the mask
    torch.testing.assert_close(batch[:1], alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone_no_mask, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(garbage, batch, atol=1e-5, rtol=1e-5)
    if real < L:
        assert (batch[0] - batch[1]).abs().max() > 1e-3  # the two samples differ: the check has power


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(window=127), "must be even"),
        (dict(depths=(2, 2, 6), heads=(3, 6, 12, 24)), "one entry per stage"),
        (dict(heads=(3, 5, 12, 24)), "stage 2 has width d_model \\* 2\\*\\*1 = 192, not divisible by heads\\[1\\] = 5"),
        (dict(seq_len=32), "raise seq_len to >= 64 or use fewer stages"),
        (dict(depths=()), "non-empty tuple"),
        (dict(drop_path=1.0), "drop_path"),
    ],
)
def test_bad_configs_fail_with_a_clear_message(bad, match):
    with pytest.raises(ValueError, match=match):
        HSWConfig(**bad)


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(TypeError, match="unknown HSWConfig option"):
        models.create_model("hsw_base", num_layers=3)


def test_lists_from_params_yaml_become_tuples():
    cfg = HSWConfig(depths=[1, 1], heads=[2, 4], seq_len=64)
    assert cfg.depths == (1, 1) and cfg.heads == (2, 4)
    assert cfg.stage_lengths(100) == [100, 25]  # only padded to whole merge groups (the attention pads itself)
    assert HSWConfig(depths=[1, 1, 1], heads=[1, 1, 1], seq_len=64).stage_lengths(1001) == [1004, 252, 63]
