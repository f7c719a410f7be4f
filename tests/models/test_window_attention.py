"""Partitioned (Swin-style) window attention: kernel vs the dense block-mask oracle, the wrap-around mask, module.

The banded kernel (Longformer, enhanced SwarmFormer) is tested against its oracles in tests/models/test_baselines.py
and tests/models/test_swarmformer_enhanced.py.
"""

from __future__ import annotations

import pytest
import torch

from swarmlab.testing.reference_window_attention import dense_shifted_forward, dense_shifted_window_attention
from models.layers.window_attention import (
    ShiftedWindowAttention,
    partitioned_window_attention,
    shifted_window_attention,
    shifted_window_mask,
    window_block_ids,
    window_partition,
    window_reverse,
)


def _inputs(B=2, H=3, L=24, Dh=8, W=8, seed=0, masked=True):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, Dh, generator=g, requires_grad=True) for _ in range(3))
    bias = torch.randn(H, 2 * W - 1, generator=g, requires_grad=True)
    key_mask = None
    if masked:
        key_mask = torch.rand(B, L, generator=g) > 0.3
        key_mask[1, :] = False  # a sample with no key at all: every row must be 0, not NaN
        key_mask[0, : W // 2] = False  # the start (which a shifted block wraps around) partly padded
    return q, k, v, bias, key_mask


def test_block_ids_and_mask_are_the_documented_ones():
    # Guards the oracle and the mask themselves: L = 8, W = 4, shift 2 cuts the sequence at 2 and 6.
    assert window_block_ids(8, 4, 2).tolist() == [0, 0, 1, 1, 1, 1, 2, 2]
    assert window_block_ids(8, 4, 0).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    m = shifted_window_mask(8, 4, 2)  # (nW, W, W); rolled, the last window holds tokens 6, 7 | 0, 1
    assert m[0].all()
    assert m[1].tolist() == [
        [True, True, False, False],
        [True, True, False, False],
        [False, False, True, True],
        [False, False, True, True],
    ]
    assert shifted_window_mask(8, 4, 0).all()


@pytest.mark.parametrize("L,W", [(8, 8), (24, 8), (32, 4), (30, 6), (13, 8), (3, 8)])  # the last two padded inside
@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_shifted_window_attention_equals_dense_block_mask(L, W, shifted, masked):
    q, k, v, bias, key_mask = _inputs(L=L, W=W, masked=masked)
    shift = W // 2 if shifted else 0
    fast = shifted_window_attention(q, k, v, key_mask, window=W, shift=shift, rel_bias=bias)
    slow = dense_shifted_window_attention(q, k, v, key_mask, window=W, shift=shift, rel_bias=bias)
    assert fast.shape == q.shape and torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    if masked:
        assert (fast[1] == 0).all(), "a sample without keys gives zeros"
    w = torch.randn_like(fast)
    g_fast = torch.autograd.grad((fast * w).sum(), (q, k, v, bias))
    g_slow = torch.autograd.grad((slow * w).sum(), (q, k, v, bias))
    for a, b in zip(g_fast, g_slow):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
def test_no_attention_across_the_wrap_around(masked):
    """Shifted by W/2, the rolled last window holds the sequence's end and its start: perturbing the last
    tokens may change only the outputs of their own block (the end), never those of the start."""
    L, W, s = 32, 8, 4
    q, k, v, bias, key_mask = _inputs(B=1, L=L, W=W, masked=False)
    key_mask = torch.ones(1, L, dtype=torch.bool) if masked else None
    q2, k2, v2 = (t.detach().clone() for t in (q, k, v))
    for t in (q2, k2, v2):
        t[:, :, L - 3 :] += 5.0  # the last 3 tokens
    with torch.no_grad():
        before = shifted_window_attention(q, k, v, key_mask, window=W, shift=s, rel_bias=bias)
        after = shifted_window_attention(q2, k2, v2, key_mask, window=W, shift=s, rel_bias=bias)
    changed = ((after - before).abs() > 1e-6).any(dim=-1).any(dim=1)[0]  # (L,)
    block = window_block_ids(L, W, s)
    may_change = block == block[L - 1]  # the block mask: only the last block [L - s, L) sees those keys
    assert changed.tolist() == may_change.tolist()
    assert not changed[:s].any(), "the first window's outputs saw tokens rolled around the end"

    # The same roll without Swin's mask does leak: this test would catch a missing mask.
    with torch.no_grad():
        leak = [
            partitioned_window_attention(*(torch.roll(t, -s, dims=2) for t in x), window=W, rel_bias=bias)
            for x in ((q, k, v), (q2, k2, v2))
        ]
    leak = [torch.roll(t, s, dims=2) for t in leak]
    assert ((leak[1] - leak[0])[:, :, :s].abs() > 1e-3).any()


def test_window_partition_and_reverse_round_trip():
    x = torch.arange(2 * 12 * 3).view(2, 12, 3)
    w = window_partition(x, 4)  # (B, nW, W, C)
    assert w.shape == (2, 3, 4, 3) and (w[0, 1, 0] == x[0, 4]).all()
    assert torch.equal(window_reverse(w), x)
    with pytest.raises(ValueError, match="not a multiple of the window"):
        window_partition(x, 5)


@pytest.mark.parametrize("shift", [0, 4])
def test_module_matches_its_dense_path_and_every_parameter_learns(shift):
    torch.manual_seed(0)
    attn = ShiftedWindowAttention(12, heads=3, window=8, shift=shift).eval()
    x = torch.randn(2, 21, 12)  # not a multiple of the window: the attention pads inside
    mask = torch.arange(21)[None, :] < torch.tensor([21, 13])[:, None]  # (B, L): sample 1 padded
    torch.testing.assert_close(attn(x, mask), dense_shifted_forward(attn, x, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x), dense_shifted_forward(attn, x), atol=1e-5, rtol=1e-5)
    attn(x, mask).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attn.parameters())


def test_bad_shift_is_a_clear_error():
    with pytest.raises(ValueError, match="shift must be in"):
        ShiftedWindowAttention(8, heads=2, window=8, shift=8)
