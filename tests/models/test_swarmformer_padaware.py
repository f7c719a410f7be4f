"""Padding-aware SwarmFormer: PAD never reaches a real token, so appending PAD leaves the logits unchanged."""

import pytest
import torch

import models
from models.swarmformer import SwarmFormer, SwarmFormerConfig

SMALL_LIKE = dict(vocab_size=97, d_model=32, num_layers=2, t_local=3, cluster_size=8, seq_len=64, dropout=0.4)
BASE_LIKE = dict(vocab_size=97, d_model=48, num_layers=2, t_local=3, cluster_size=4, seq_len=96, dropout=0.4)


def _model(cfg: dict, *, fast: bool, padding_aware: bool = True, seed: int = 0) -> SwarmFormer:
    torch.manual_seed(seed)
    model = SwarmFormer(SwarmFormerConfig(**cfg, fast=fast, padding_aware=padding_aware))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 1.0 if p.ndim < 2 or name.startswith("head") else p.shape[1] ** -0.5)
    return model.eval()


def _batch(cfg: dict, lengths: list[int], L: int, *, pad_id: int = 0, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, cfg["vocab_size"], (len(lengths), L), generator=g)
    mask = torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]  # (B, L) bool, True = real
    ids[~mask] = pad_id
    return ids, mask


@pytest.mark.parametrize("cfg", [SMALL_LIKE, BASE_LIKE], ids=["small_like", "base_like"])
@pytest.mark.parametrize("fast", [False, True])
def test_appending_pad_leaves_logits_unchanged(cfg, fast):
    model = _model(cfg, fast=fast)
    S = cfg["cluster_size"]
    short_len = 4 * S
    lengths = [short_len, short_len - 1, S + 1, 3, 1]  # full, partly-PAD last cluster, all-PAD clusters
    ids, mask = _batch(cfg, lengths, short_len)
    extra = 5 * S  # seq_len stays a multiple of S
    long_ids = torch.cat([ids, torch.zeros(len(lengths), extra, dtype=ids.dtype)], dim=1)
    long_mask = torch.cat([mask, torch.zeros(len(lengths), extra, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        short, long = model(ids, mask), model(long_ids, long_mask)
    assert short.abs().max() > 0.5
    torch.testing.assert_close(long, short, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fast", [False, True])
def test_pad_token_ids_do_not_matter(fast):
    """Whatever sits under mask=False (PAD id, garbage ids) leaves the logits unchanged."""
    model = _model(SMALL_LIKE, fast=fast)
    ids, mask = _batch(SMALL_LIKE, [64, 40, 9, 2], 64)
    garbage = torch.where(mask, ids, torch.randint(1, 97, ids.shape))
    with torch.no_grad():
        torch.testing.assert_close(model(garbage, mask), model(ids, mask), rtol=1e-5, atol=1e-5)


def test_the_authors_model_is_not_padding_invariant():
    """Control: without padding_aware the same extension changes the logits (the property is not vacuous)."""
    model = _model(SMALL_LIKE, fast=True, padding_aware=False)
    ids, mask = _batch(SMALL_LIKE, [20, 31], 32)
    long_ids = torch.cat([ids, torch.zeros(2, 32, dtype=ids.dtype)], 1)
    long_mask = torch.cat([mask, torch.zeros(2, 32, dtype=torch.bool)], 1)
    with torch.no_grad():
        assert not torch.allclose(model(ids, mask), model(long_ids, long_mask), atol=1e-3)


@pytest.mark.parametrize("fast", [False, True])
def test_mask_none_means_all_real_and_no_wrap_around(fast):
    model = _model(SMALL_LIKE, fast=fast)
    ids, _ = _batch(SMALL_LIKE, [64, 64], 64)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), model(ids, torch.ones(2, 64, dtype=torch.bool)), rtol=0, atol=0)
        # with no PAD the padding-aware model still differs from the authors' one: only by the ends' neighbours
        authors = _model(SMALL_LIKE, fast=fast, padding_aware=False)
        assert not torch.allclose(model(ids), authors(ids), atol=1e-4)


def test_end_tokens_average_over_the_neighbours_they_have():
    """The plain path's neighbour mean, seen at the MLP's input: ends average 2 tokens, PAD is left out."""
    model = _model(SMALL_LIKE, fast=False)
    local = model.layers[0].local
    seen = []
    handle = local.mlp.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    ids, mask = _batch(SMALL_LIKE, [64, 10], 64)
    x0 = model.tok_emb(ids) * mask.unsqueeze(-1)  # eval: no dropout; the state entering layer 0
    with torch.no_grad():
        model(ids, mask)
    handle.remove()
    n = seen[0]  # (B, L, D): first local step of layer 0
    torch.testing.assert_close(n[0, 0], (x0[0, 0] + x0[0, 1]) / 2)
    torch.testing.assert_close(n[0, -1], (x0[0, -2] + x0[0, -1]) / 2)
    torch.testing.assert_close(n[0, 5], (x0[0, 4] + x0[0, 5] + x0[0, 6]) / 3)
    torch.testing.assert_close(n[1, 9], (x0[1, 8] + x0[1, 9]) / 2)  # token 10 is PAD
    torch.testing.assert_close(n[1, 10], x0[1, 9])  # a PAD token next to one real token
    torch.testing.assert_close(n[1, 20], torch.zeros_like(n[1, 20]))  # PAD among PAD: 0, not NaN


@pytest.mark.parametrize("fast", [False, True])
def test_pad_states_are_zero_between_blocks(fast):
    model = _model(SMALL_LIKE, fast=fast)
    ids, mask = _batch(SMALL_LIKE, [64, 13, 1], 64)
    states = []
    hooks = [layer.register_forward_hook(lambda mod, args, out: states.append(out)) for layer in model.layers]
    hooks += [layer.local.register_forward_hook(lambda mod, args, out: states.append(out)) for layer in model.layers]
    with torch.no_grad():
        model(ids, mask)
    for h in hooks:
        h.remove()
    assert len(states) == 2 + 2 * 3
    for x in states:
        assert torch.isfinite(x).all()
        assert torch.equal(x[~mask], torch.zeros_like(x[~mask]))
        assert x[mask].abs().sum() > 0


@pytest.mark.parametrize("fast", [False, True])
def test_all_pad_sequence_and_clusters_stay_finite_in_train_mode(fast):
    model = _model(SMALL_LIKE, fast=fast).train()
    ids, mask = _batch(SMALL_LIKE, [0, 1, 64], 64)  # an all-PAD row, a row of all-PAD clusters but one
    out = model(ids, mask)
    assert torch.isfinite(out).all()
    out.logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("fast", [False, True])
def test_pad_positions_receive_no_gradient(fast):
    """Embedding rows used only under PAD get an exactly zero gradient: nothing flows from PAD."""
    model = _model(SMALL_LIKE, fast=fast).train()
    ids, mask = _batch(SMALL_LIKE, [30, 17], 64)
    ids[mask] = torch.randint(1, 50, (int(mask.sum()),))
    ids[~mask] = torch.randint(50, 97, (int((~mask).sum()),))  # ids 50.. appear only at PAD positions
    model(ids, mask).logsumexp(-1).sum().backward()
    grad = model.tok_emb.weight.grad
    assert torch.equal(grad[50:], torch.zeros_like(grad[50:]))
    assert grad[torch.unique(ids[mask])].abs().sum(-1).gt(0).all()


@pytest.mark.parametrize(
    "name, base",
    [("swarmformer_small_padaware", "swarmformer_small"), ("swarmformer_base_padaware", "swarmformer_base")],
)
def test_registered_padaware_variants(name, base):
    model, reference = models.create_model(name), models.create_model(base)
    assert model.cfg.padding_aware and not reference.cfg.padding_aware
    assert model.get_num_params() == reference.get_num_params()
    model.load_state_dict(reference.state_dict())  # checkpoints move between the two
    assert "padding_aware" in models.model_entry(name).tags
