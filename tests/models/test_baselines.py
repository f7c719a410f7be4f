"""Attention baselines: each fast kernel equals a dense masked oracle; configs, positions, param counts."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import models
from swarmlab.testing import reference_attention_patterns as ref
from models.layers.attention_patterns import (
    fixed_sparse_attention,
    full_attention,
    linear_attention,
    sliding_chunks_attention,
)

BASELINES = ["transformer", "longformer", "linear_transformer", "sparse_transformer"]


def _qkv_mask(B=3, H=2, L=37, Dh=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, Dh, generator=g) for _ in range(3))
    key_mask = torch.ones(B, L, dtype=torch.bool)
    key_mask[1, L - L // 3 :] = False  # right padding
    key_mask[1, L // 4] = False  # a hole inside the sequence (token 0 itself when L < 4)
    key_mask[2, :] = False  # a fully padded sequence: every output row must be 0, not NaN
    return q, k, v, key_mask


@pytest.mark.parametrize("L", [1, 5, 37, 64])
@pytest.mark.parametrize("window", [1, 4, 16, 80])
@pytest.mark.parametrize("global_first", [True, False])
@pytest.mark.parametrize("masked", [True, False])
def test_sliding_chunks_matches_dense_reference(L, window, global_first, masked):
    q, k, v, key_mask = _qkv_mask(L=L)
    key_mask = key_mask if masked else None
    fast = sliding_chunks_attention(q, k, v, key_mask, window_one_sided=window, global_first=global_first)
    pattern = ref.sliding_window_pattern(L, window_one_sided=window, global_first=global_first)
    slow = ref.dense_attention(q, k, v, pattern, key_mask)
    assert fast.shape == q.shape
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("L", [1, 7, 37, 64])
@pytest.mark.parametrize("block,summary", [(8, 1), (8, 3), (16, 16), (4, 2)])
@pytest.mark.parametrize("max_chunk_elems", [1, 2**22])  # 1 forces one query block per chunk
@pytest.mark.parametrize("masked", [True, False])
def test_fixed_sparse_matches_dense_reference(L, block, summary, max_chunk_elems, masked):
    q, k, v, key_mask = _qkv_mask(L=L)
    key_mask = key_mask if masked else None
    fast = fixed_sparse_attention(q, k, v, key_mask, block=block, summary=summary, max_chunk_elems=max_chunk_elems)
    slow = ref.dense_attention(q, k, v, ref.fixed_sparse_pattern(L, block=block, summary=summary), key_mask)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["sdpa", "dense"])
@pytest.mark.parametrize("masked", [True, False])
def test_full_attention_matches_dense_reference(impl, masked):
    q, k, v, key_mask = _qkv_mask(L=29)
    key_mask = key_mask if masked else None
    fast = full_attention(q, k, v, key_mask, impl=impl)
    slow = ref.dense_attention(q, k, v, ref.full_pattern(29), key_mask)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("masked", [True, False])
def test_linear_attention_matches_dense_reference(masked):
    q, k, v, key_mask = _qkv_mask(L=29)
    key_mask = key_mask if masked else None
    fast = linear_attention(q, k, v, key_mask)
    slow = ref.dense_linear_attention(q, k, v, key_mask)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    if masked:
        assert (fast[2] == 0).all(), "a fully padded sequence must give 0"


def test_reference_patterns_have_the_documented_shape():
    # Guards the oracles themselves: counts follow from the definitions, not from the kernels.
    L, w = 20, 3
    lf = ref.sliding_window_pattern(L, window_one_sided=w, global_first=True)
    assert lf[0].all() and lf[:, 0].all()
    assert lf[10].sum() == 2 * w + 1 + 1  # band plus the global key 0
    assert not lf[10, 10 + w + 1] and lf[10, 10 + w]
    sp = ref.fixed_sparse_pattern(16, block=4, summary=1)
    assert sp[5].nonzero().flatten().tolist() == [3, 4, 5, 6, 7, 11, 15]  # own block 4..7 + summaries 3, 7, 11, 15


def test_sliding_chunks_memory_is_linear_in_length():
    # The kernel never builds an (L, L) tensor: the largest intermediate is (B, H, n, W, 3W+1).
    B, H, L, Dh, w = 1, 2, 4096, 8, 16
    q = k = v = torch.randn(B, H, L, Dh)
    largest = 0

    class Track(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            nonlocal largest
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    largest = max(largest, t.numel())
            return out

    with Track():
        sliding_chunks_attention(q, k, v, None, window_one_sided=w, global_first=True)
    assert largest <= B * H * L * (3 * w + 1), f"an intermediate of {largest} elements (L^2 = {L * L})"
    largest = 0
    with Track():
        fixed_sparse_attention(q, k, v, None, block=64, summary=2, max_chunk_elems=2**18)
    assert largest <= max(2**18 * 2, B * H * L * Dh), f"an intermediate of {largest} elements (L^2 = {L * L})"


@pytest.mark.parametrize("name", BASELINES)
def test_default_sizes_and_param_counts(name):
    model = models.create_model(name)
    cfg = model.cfg
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.seq_len) == (128, 2, 4, 256)
    assert model.get_num_params() == model.expected_num_params(cfg) == 4_336_642


@pytest.mark.parametrize("name", BASELINES)
def test_width_and_depth_are_configurable(name):
    model = models.create_model(name, vocab_size=50, d_model=24, num_layers=3, num_heads=3, seq_len=40)
    assert len(model.blocks) == 3
    assert model.get_num_params() == model.expected_num_params(model.cfg)
    assert model(torch.randint(0, 50, (2, 40))).shape == (2, 2)


@pytest.mark.parametrize("name", BASELINES)
def test_sinusoidal_positions_have_no_parameters_and_any_length(name):
    model = models.create_model(name, vocab_size=50, d_model=16, seq_len=32, num_layers=1, pos_emb="sinusoidal").eval()
    assert model.pos_emb is None
    assert model.get_num_params() == model.expected_num_params(model.cfg)
    assert model(torch.randint(0, 50, (1, 96))).shape == (1, 2)  # longer than seq_len: fine without a table


@pytest.mark.parametrize("name", BASELINES)
def test_positions_matter(name):
    # A bag-of-words model would give the same logits for a permuted input.
    # Without positions the logits are permutation-invariant here (at L = 32 the default window and block
    # cover the whole input, so every pattern is full attention), so flipping changes nothing.
    torch.manual_seed(0)
    model = models.create_model(name, vocab_size=50, d_model=16, seq_len=32, num_layers=1).eval()
    for p in model.parameters():  # O(1) weights, so that a position effect is far above rounding
        torch.nn.init.normal_(p, std=0.5)
    ids = torch.randint(0, 50, (1, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (model(ids) - model(ids.flip(1))).abs().max() > 1e-3
        model.pos_emb.weight.zero_()
        torch.testing.assert_close(model(ids), model(ids.flip(1)), atol=1e-5, rtol=1e-5)


def test_learned_positions_reject_longer_inputs():
    model = models.create_model("transformer", vocab_size=50, d_model=16, seq_len=32, num_layers=1)
    with pytest.raises(ValueError, match="exceeds seq_len=32"):
        model(torch.randint(0, 50, (1, 33)))


@pytest.mark.parametrize(
    "name,bad,match",
    [
        ("transformer", dict(num_heads=3), "not divisible by num_heads"),
        ("transformer", dict(attn_impl="flash"), "attn_impl"),
        ("transformer", dict(pos_emb="rope"), "pos_emb"),
        ("longformer", dict(window_one_sided=0), "window_one_sided"),
        ("sparse_transformer", dict(summary=40), "summary=40"),
        ("linear_transformer", dict(eps=0.0), "eps"),
        ("transformer", dict(windw=3), "unknown TransformerConfig option"),
    ],
)
def test_bad_configs_fail_with_a_clear_message(name, bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        models.create_model(name, **bad)


def test_sdpa_and_dense_transformers_agree():
    torch.manual_seed(0)
    a = models.create_model("transformer", vocab_size=50, d_model=16, seq_len=32, num_layers=2).eval()
    b = models.create_model(
        "transformer", vocab_size=50, d_model=16, seq_len=32, num_layers=2, attn_impl="dense"
    ).eval()
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, 50, (3, 32))
    mask = torch.ones(3, 32, dtype=torch.bool)
    mask[1, 20:] = False
    mask[2] = False
    with torch.no_grad():
        out_a, out_b = a(ids, mask), b(ids, mask)
    assert torch.isfinite(out_a).all()
    torch.testing.assert_close(out_a, out_b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padded", [False, True])
def test_materialised_scores_path_equals_sdpa_in_values_and_gradients(padded):
    """``transformer_dense`` (the (B, H, L, L) scores written out) against ``transformer`` (SDPA), fp32, in training
    mode without dropout: logits and every parameter's gradient, with padded and fully padded sequences."""
    torch.manual_seed(0)
    kw = dict(vocab_size=50, d_model=16, seq_len=24, num_layers=2, dropout=0.0)
    sdpa = models.create_model("transformer", **kw).train()
    dense = models.create_model("transformer_dense", **kw).train()
    assert dense.cfg.attn_impl == "dense" and sdpa.cfg.attn_impl == "sdpa"
    dense.load_state_dict(sdpa.state_dict())  # same parameter names
    ids = torch.randint(0, 50, (4, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(4, 24, dtype=torch.bool)
    if padded:
        mask[1, 15:] = False
        mask[2, 3:] = False
        mask[3] = False
    results = []
    for model in (sdpa, dense):
        logits = model(ids, mask)
        grads = torch.autograd.grad(
            (logits * torch.tensor([1.0, -2.0])).sum(), list(model.parameters()), allow_unused=True
        )
        results.append((logits, grads))
    (la, ga), (lb, gb) = results
    assert torch.isfinite(la).all()
    torch.testing.assert_close(lb, la, atol=1e-5, rtol=1e-5)
    for (name, _), a, b in zip(sdpa.named_parameters(), ga, gb):
        assert (a is None) == (b is None), name
        if a is not None:
            assert torch.isfinite(a).all(), name
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
