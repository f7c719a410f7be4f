"""Set models (kind="set") and their blocks: shapes, gradients, permutation equivariance, padding invariance.

Every registered set model is covered without editing this file when its config accepts the tiny keys below
(unknown keys are dropped per model), so the SWARM model is tested as soon as it is registered; a model tagged
``permutation_equivariant`` must pass the equivariance test.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import pytest
import torch
import torch.nn as nn

import models
from models.layers.attention import MultiHeadAttention, MultiHeadSelfAttention
from models.layers.set_blocks import MAB, PMA, SetPoolingHead
from models.set_lstm import entity_order

SET_MODELS = models.list_models(kind="set")
EQUIVARIANT = [n for n in SET_MODELS if "permutation_equivariant" in models.model_entry(n).tags]
TINY = dict(dim_input=2, dim_output=5, dim_hidden=8, num_heads=2, num_layers=2, num_inds=3, ff_depth=2)
TINY_EXTRA: dict[str, dict] = {}  # name -> overrides for constraints TINY does not meet


@functools.lru_cache(maxsize=None)
def config_fields(name: str) -> frozenset[str]:
    cfg = models.create_model(name).cfg
    assert dataclasses.is_dataclass(cfg), f"{name}: model.cfg must be a config dataclass"
    return frozenset(f.name for f in dataclasses.fields(cfg))


def tiny_model(name: str, **changes) -> nn.Module:
    fields = config_fields(name)
    missing = {"dim_input", "dim_output"} - fields
    assert not missing, f"{name}: a set model's config must have {sorted(missing)}"
    torch.manual_seed(0)
    return models.create_model(
        name, **{k: v for k, v in TINY.items() if k in fields}, **TINY_EXTRA.get(name, {}), **changes
    )


def random_sets(B: int = 3, N: int = 9, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """x (B, N, 2) and a mask with padding scattered inside the sets (set 0 has no padding)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, 2, generator=g)
    mask = torch.rand(B, N, generator=g) < 0.7
    mask[0] = True
    mask[:, 1] = True  # at least one real entity per set
    return x, mask


def permute_real(mask: torch.Tensor, seed: int = 2) -> torch.Tensor:
    """idx (B, N): a random permutation of each set's real entities, padded positions fixed."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.arange(mask.shape[1]).repeat(mask.shape[0], 1)
    for b in range(mask.shape[0]):
        real = mask[b].nonzero().squeeze(1)
        idx[b, real] = real[torch.randperm(len(real), generator=g)]
    return idx


def gather_rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return t.gather(1, idx[..., None].expand(-1, -1, t.shape[-1]))


# ---------------------------------------------------------------------------------------------------------------
# Shared attention module


def dense_attention(mha: MultiHeadAttention, queries, kv, key_mask):
    """Explicit softmax(QK^T / sqrt(Dh)) V per head, fully masked rows 0: the oracle for the SDPA path."""
    B, M, _ = queries.shape
    N, H, Dh = kv.shape[1], mha.heads, mha.dim_head
    q = mha.q_proj(queries).view(B, M, H, Dh).transpose(1, 2)  # (B, H, M, Dh)
    k = mha.k_proj(kv).view(B, N, H, Dh).transpose(1, 2)  # (B, H, N, Dh)
    v = mha.v_proj(kv).view(B, N, H, Dh).transpose(1, 2)  # (B, H, N, Dh)
    scores = torch.einsum("bhmd,bhnd->bhmn", q, k) / math.sqrt(Dh)  # (B, H, M, N)
    scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all -inf rows -> NaN -> 0
    out = torch.einsum("bhmn,bhnd->bhmd", weights, v).transpose(1, 2).reshape(B, M, H * Dh)
    return mha.out_proj(out)


def test_cross_attention_with_key_mask_matches_the_dense_reference():
    torch.manual_seed(0)
    mha = MultiHeadAttention(6, 5, heads=2, dim_head=3, dim_out=4)  # H*Dh = 6 != widths: scale must be per head
    queries, kv = torch.randn(3, 4, 6), torch.randn(3, 7, 5)
    key_mask = torch.tensor([[True] * 7, [True, False, True, False, False, True, False], [False] * 7])
    out = mha(queries, kv, key_mask)
    assert out.shape == (3, 4, 4)
    torch.testing.assert_close(out, dense_attention(mha, queries, kv, key_mask), atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    mha = MultiHeadAttention(4, heads=2, dim_head=2, out_proj=False)
    x = torch.randn(2, 5, 4, requires_grad=True)
    key_mask = torch.tensor([[True, False, True, True, False], [False] * 5])
    out = mha(x, None, key_mask)
    assert (out[1] == 0).all() and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


@pytest.mark.parametrize("tied", [False, True])
def test_self_attention_keeps_its_parameter_names_and_equals_the_general_module(tied):
    torch.manual_seed(0)
    sa = MultiHeadSelfAttention(8, heads=2, dim_head=4, tied_qkv=tied, out_proj=True)
    names = ["qkv_proj"] if tied else ["q_proj", "k_proj", "v_proj"]
    assert list(sa.state_dict()) == [f"{n}.{p}" for n in names + ["out_proj"] for p in ("weight", "bias")]
    general = MultiHeadAttention(8, heads=2, dim_head=4, tied_qkv=tied)
    general.load_state_dict(sa.state_dict())
    x, mask = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True, True, False, True, False]])
    torch.testing.assert_close(sa(x, mask), general(x, None, mask))
    torch.testing.assert_close(sa(x, mask), general(x, x, mask))


def test_swarmformer_style_single_head_attention_keeps_its_names():
    sa = MultiHeadSelfAttention(6, heads=1, dim_head=6, tied_qkv=False, out_proj=False)
    assert sorted(sa.state_dict()) == sorted(
        f"{n}.{p}" for n in ("q_proj", "k_proj", "v_proj") for p in ("weight", "bias")
    )
    with pytest.raises(ValueError, match="enable out_proj"):
        MultiHeadSelfAttention(6, heads=2, dim_head=2, tied_qkv=False, out_proj=False)


# ---------------------------------------------------------------------------------------------------------------
# Blocks


def test_pma_applies_its_row_wise_feed_forward_before_pooling():
    torch.manual_seed(0)
    pma = PMA(8, heads=2, num_seeds=2, ff_depth=1)
    x, mask = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True, False, True, False, False]])
    expected = pma.mab(pma.seeds.expand(2, -1, -1), pma.rff(x), mask)  # eq. 11: MAB(S, rFF(Z))
    torch.testing.assert_close(pma(x, mask), expected)
    without_rff = pma.mab(pma.seeds.expand(2, -1, -1), x, mask)
    assert (pma(x, mask) - without_rff).abs().max() > 1e-3


def test_mab_without_layer_norm_has_plain_residuals():
    torch.manual_seed(0)
    mab = MAB(8, heads=2, layer_norm=False)
    assert not any(isinstance(m, nn.LayerNorm) for m in mab.modules())
    x, y = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    h = x + mab.attn(x, y)
    torch.testing.assert_close(mab(x, y), h + mab.rff(h))


@pytest.mark.parametrize("pooling", ["mean", "pma"])
def test_pooling_heads_are_invariant_and_ignore_padding(pooling):
    torch.manual_seed(0)
    head = SetPoolingHead(8, 3, pooling=pooling, heads=2).eval()
    x = torch.randn(3, 9, 8)
    _, mask = random_sets()
    out = head(x, mask)
    assert out.shape == (3, 3)
    torch.testing.assert_close(head(gather_rows(x, permute_real(mask)), mask), out, atol=1e-5, rtol=1e-5)
    noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 100)
    torch.testing.assert_close(head(noisy, mask), out, atol=1e-5, rtol=1e-5)
    empty = head(x, torch.zeros(3, 9, dtype=torch.bool))
    assert torch.isfinite(empty).all()


def test_pooling_head_rejects_an_unknown_pooling():
    with pytest.raises(ValueError, match="pooling must be one of"):
        SetPoolingHead(8, 3, pooling="sum")


# ---------------------------------------------------------------------------------------------------------------
# Every registered set model


def test_the_baselines_are_registered_as_set_models():
    assert {
        "set_transformer_sab",
        "set_transformer_isab",
        "set_linear_mean",
        "set_linear_max",
        "lstm",
        "lstm_sorted",
    } <= set(SET_MODELS)
    assert {"set_transformer_sab", "set_transformer_isab", "set_linear_mean", "set_linear_max", "lstm_sorted"} <= set(
        EQUIVARIANT
    )
    assert "lstm" not in EQUIVARIANT


@pytest.mark.parametrize("name", SET_MODELS)
def test_forward_backward_every_parameter_gets_a_finite_gradient(name):
    model = tiny_model(name).train()
    x, mask = random_sets()
    out = model(x, mask)
    assert out.shape == (3, 9, 5)
    assert torch.isfinite(out).all()
    (out[mask] ** 2).sum().backward()
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not no_grad, f"{name}: parameters without a gradient: {no_grad}"
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all()]
    assert not bad, f"{name}: non-finite gradients in {bad}"
    zero = [n for n, p in model.named_parameters() if p.grad.abs().sum() == 0]
    assert not zero, f"{name}: all-zero gradients in {zero}"
    assert model.get_num_params() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", SET_MODELS)
def test_forward_without_mask_means_all_real(name):
    model = tiny_model(name).eval()
    x, _ = random_sets()
    with torch.no_grad():
        out = model(x)
        torch.testing.assert_close(out, model(x, torch.ones(3, 9, dtype=torch.bool)))
    assert out.shape == (3, 9, 5) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", SET_MODELS)
def test_padding_does_not_change_the_real_outputs(name):
    """Eval mode: appending padding, or changing the values under the mask, leaves the real entities' outputs."""
    model = tiny_model(name).eval()
    g = torch.Generator().manual_seed(3)
    short = torch.randn(2, 6, 2, generator=g)
    padded = torch.cat([short, torch.randn(2, 4, 2, generator=g) * 10], dim=1)
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[:, :6] = True
    mask[1, 4:6] = False  # set 1 is shorter: 4 real entities
    noisy = torch.where(mask[..., None], padded, torch.randn(2, 10, 2, generator=g) * 10)
    with torch.no_grad():
        ref0 = model(short[:1])[0]
        ref1 = model(short[1:, :4])[0]
        out, out_noisy = model(padded, mask), model(noisy, mask)
    torch.testing.assert_close(out[0, :6], ref0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1, :4], ref1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_noisy[mask], out[mask], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", EQUIVARIANT)
def test_permuting_the_real_entities_permutes_the_outputs(name):
    model = tiny_model(name).eval()
    x, mask = random_sets()
    idx = permute_real(mask)
    with torch.no_grad():
        out, out_perm = model(x, mask), model(gather_rows(x, idx), mask)
    torch.testing.assert_close(out_perm[mask], gather_rows(out, idx)[mask], atol=1e-5, rtol=1e-5)


def test_the_unsorted_lstm_is_not_permutation_equivariant():
    """Justifies leaving ``lstm`` out of the equivariance test: the order changes its outputs."""
    model = tiny_model("lstm").eval()
    x, mask = random_sets()
    idx = permute_real(mask)
    with torch.no_grad():
        out, out_perm = model(x, mask), model(gather_rows(x, idx), mask)
    assert (out_perm[mask] - gather_rows(out, idx)[mask]).abs().max() > 1e-4


def test_the_lstm_reads_a_fresh_random_order_of_the_real_entities_in_training():
    """Train mode = eval mode on some order of the real entities (outputs put back); the order changes per call."""
    model = tiny_model("lstm")
    x = torch.randn(1, 5, 2)
    mask = torch.tensor([[True, False, True, True, False]])  # 3 real entities: 6 possible orders
    real = mask[0].nonzero().squeeze(1)
    model.eval()
    with torch.no_grad():
        by_order = {}
        for order in itertools.permutations(range(3)):
            perm = real[list(order)]
            out = model(x[:, perm])[0]  # (3, 5): outputs in reading order
            by_order[order] = out[torch.argsort(torch.tensor(order))]  # back to the input order of the real ones
    model.train()
    seen = set()
    torch.manual_seed(4)
    with torch.no_grad():
        for _ in range(12):
            out = model(x, mask)[0]
            assert (out[~mask[0]] == 0).all()
            match = [o for o, ref in by_order.items() if torch.allclose(out[real], ref, atol=1e-5)]
            assert len(match) == 1, "train-mode output is not the output of any order of the real entities"
            seen.add(match[0])
    assert len(seen) > 1, "training never changed the order of the entities"


def test_sorted_order_is_lexicographic_and_stable_with_padding_last():
    x = torch.tensor([[[1.0, 5.0], [0.0, 9.0], [1.0, 2.0], [-3.0, 0.0], [1.0, 2.0], [0.0, 1.0]]])
    mask = torch.tensor([[True, True, True, False, True, True]])
    perm = entity_order(x, mask, "sorted", shuffle=False)
    # real: (0,1)@5, (0,9)@1, (1,2)@2, (1,2)@4 (tie: input order), (1,5)@0; then the padded @3
    assert perm.tolist() == [[5, 1, 2, 4, 0, 3]]


@pytest.mark.parametrize("name", [n for n in SET_MODELS if "head" in config_fields(n)])
@pytest.mark.parametrize("head", ["mean", "pma"])
def test_invariant_heads_are_permutation_invariant(name, head):
    model = tiny_model(name, head=head).eval()
    x, mask = random_sets()
    with torch.no_grad():
        out = model(x, mask)
        out_perm = model(gather_rows(x, permute_real(mask)), mask)
        out_noisy = model(torch.where(mask[..., None], x, torch.randn_like(x) * 10), mask)
    assert out.shape == (3, 5) and torch.isfinite(out).all()
    torch.testing.assert_close(out_perm, out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_noisy, out, atol=1e-5, rtol=1e-5)
    model.train()
    model(x, mask).square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize(
    "name, bad, match",
    [
        ("set_transformer_isab", dict(dim_hidden=10, num_heads=4), "not divisible by num_heads"),
        ("set_transformer_sab", dict(head="sum"), "head must be one of"),
        ("set_transformer_isab", dict(num_inds=0), "num_inds must be >= 1"),
        ("set_linear_mean", dict(num_layers=0), "num_layers must be >= 1"),
        ("lstm", dict(order="random"), "order must be one of"),
        ("lstm_sorted", dict(dropout=1.0), "dropout must be >= 0 and < 1"),
    ],
)
def test_configs_reject_bad_values_with_a_message(name, bad, match):
    with pytest.raises(ValueError, match=match):
        models.create_model(name, **bad)


def test_unknown_overrides_and_wrong_input_widths_are_errors():
    with pytest.raises(TypeError, match="valid"):
        models.create_model("set_linear_max", hidden=3)
    model = tiny_model("set_linear_mean")
    with pytest.raises(ValueError, match=r"x must be \(B, N, 2\)"):
        model(torch.randn(2, 5, 3))


def test_default_sizes_are_the_papers_best_codes():
    """Table 2 of paper 003: SetTransformer (32-60-3), SetLinear (64-6), (max) (96-6), LSTM (128-3), sorted (64-3)."""
    isab = models.create_model("set_transformer_isab").cfg
    assert (isab.dim_hidden, isab.num_inds, isab.num_layers) == (32, 60, 3)
    assert (
        models.create_model("set_linear_mean").cfg.dim_hidden,
        models.create_model("set_linear_mean").cfg.num_layers,
    ) == (64, 6)
    assert models.create_model("set_linear_max").cfg.dim_hidden == 96
    assert (models.create_model("lstm").cfg.dim_hidden, models.create_model("lstm").cfg.num_layers) == (128, 3)
    assert models.create_model("lstm_sorted").cfg.dim_hidden == 64
    assert models.create_model("set_transformer_isab").get_num_params() == 57_642


def test_the_public_isab_transcription_is_permutation_equivariant():
    """swarmlab/testing/reference_set_transformer.py (the benchmark's public-ISAB rows) computes a set function, as theirs."""
    from swarmlab.testing.reference_set_transformer import PublicISABEncoder

    torch.manual_seed(0)
    model = PublicISABEncoder(2, 10, dim_hidden=16, num_heads=4, num_inds=5, num_layers=2).eval()
    x = torch.randn(3, 12, 2)
    perm = torch.randperm(12)
    assert torch.allclose(model(x)[:, perm], model(x[:, perm]), atol=1e-5)
    assert model.blocks[0].mab0.fc_k.in_features == 2  # the first ISAB reads the raw points, no embedding
