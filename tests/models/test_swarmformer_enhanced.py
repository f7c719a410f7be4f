"""Enhanced SwarmFormer: shapes, gradients, padding invariance, routing, pyramid, window attention, parity."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from types import SimpleNamespace
import torch

import models
from models.layers.attention import masked_sdpa
from models.layers.clustering import GumbelRouter
from models.layers.neighbours import circular_neighbour_mean
from models.layers.window_attention import LocalWindowAttention, sliding_window_attention
from swarmlab.testing.reference_window_attention import dense_local_forward, dense_window_attention
from models.swarmformer_enhanced import SWITCHES, EnhancedSwarmFormer, gumbel_anneal_callback

ENHANCED = [n for n in models.list_models() if n.startswith("swarmformer_enhanced")]
ABLATIONS = {f"swarmformer_enhanced_small_{suffix}": switch for switch, suffix in SWITCHES.items()}
# C = 64 / 4 = 16 clusters in layer 0, 8 in layer 1; 2 heads of 16; window +-4
TINY = dict(
    vocab_size=101,
    d_model=32,
    heads=2,
    dim_head=16,
    seq_len=64,
    cluster_size=4,
    routing_block=64,
    window_one_sided=4,
    t_local=2,
)


def tiny(name: str, **overrides) -> EnhancedSwarmFormer:
    torch.manual_seed(0)
    return models.create_model(name, **{**TINY, **overrides})


def right_padded_batch(lengths: list[int], total: int, *, vocab: int = 101, seed: int = 0):
    """ids (B, total) with garbage ids at PAD positions (the model must ignore them), mask (B, total)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (len(lengths), total), generator=g)
    mask = torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]
    return ids, mask


def test_registry_has_every_variant():
    expected = {
        "swarmformer_enhanced_small",
        "swarmformer_enhanced_base",
        "swarmformer_enhanced_small_all_off",
        *ABLATIONS,
    }
    assert set(ENHANCED) == expected


@pytest.mark.parametrize("name", ENHANCED)
def test_forward_shape_and_finite(name):
    model = tiny(name).eval()
    ids, mask = right_padded_batch([64, 50, 3], 64)
    for m in (mask, None):
        logits = model(ids, m)
        assert logits.shape == (3, 2)
        assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", ENHANCED)
@pytest.mark.parametrize("hard", [False, True])
def test_every_parameter_gets_a_gradient(name, hard):
    model = tiny(name, gumbel_hard=hard, dropout=0.1, attn_dropout=0.1).train()
    ids, mask = right_padded_batch([64, 40, 17, 64], 64)
    model(ids, mask).square().sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient for {missing}"
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all()]
    assert not bad, f"non-finite gradient for {bad}"


@pytest.mark.parametrize(
    "name",
    ["swarmformer_enhanced_small", "swarmformer_enhanced_small_all_off", "swarmformer_enhanced_small_no_routing"],
)
@pytest.mark.parametrize("hard", [False, True])
def test_fully_padded_row_gives_no_nan(name, hard):
    model = tiny(name, gumbel_hard=hard).train()
    ids, mask = right_padded_batch([0, 30], 64)  # the first sample is all PAD
    logits = model(ids, mask)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        out = model(ids, mask)
    assert torch.allclose(out[0], model.head.bias), "an all-PAD sample pools zeros: logits are the head bias"


@pytest.mark.parametrize("name", ENHANCED)
@pytest.mark.parametrize("hard", [False, True])
def test_padding_invariance_eval(name, hard):
    model = tiny(name, gumbel_hard=hard).eval()
    lengths = [64, 37, 5]
    ids, mask = right_padded_batch(lengths, 64 + 45)  # 109: not a multiple of anything, padded internally
    with torch.no_grad():
        batched = model(ids, mask)  # (3, 2)
        for i, n in enumerate(lengths):
            alone = model(ids[i : i + 1, :n])  # no PAD at all, no mask
            assert torch.allclose(batched[i], alone[0], atol=1e-5, rtol=0), (name, n, batched[i], alone[0])


@pytest.mark.parametrize("seq_len,cluster_size", [(64, 4), (256, 8)])
def test_all_off_matches_the_reference_swarmformer(seq_len, cluster_size):
    """Every switch off = models.swarmformer computation with the same weights (eval; dropout RNG use differs)."""
    torch.manual_seed(0)
    shape = dict(vocab_size=101, d_model=32, seq_len=seq_len, cluster_size=cluster_size, t_local=3)
    ref = models.create_model("swarmformer_small", **shape).eval()
    ours = models.create_model("swarmformer_enhanced_small_all_off", **shape).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)  # same parameter names and shapes
    assert ours.get_num_params() == ref.get_num_params()
    ids, _ = right_padded_batch([seq_len] * 3, seq_len)
    with torch.no_grad():
        expected = ref(ids)
        assert torch.allclose(ours(ids), expected, atol=1e-5, rtol=0)
        assert torch.allclose(ours(ids, torch.ones_like(ids, dtype=torch.bool)), expected, atol=1e-5, rtol=0)
        # padded input + mask = the reference on the unpadded input (the reference cannot take PAD)
        padded = torch.cat([ids, torch.randint(1, 101, (3, 3 * cluster_size))], dim=1)
        mask = torch.arange(padded.shape[1])[None, :] < seq_len
        assert torch.allclose(ours(padded, mask.expand(3, -1)), expected, atol=1e-5, rtol=0)


def test_gumbel_rows_sum_to_one_and_hard_rows_are_one_hot():
    torch.manual_seed(0)
    x = torch.randn(3, 32, 16)
    mask = torch.arange(32)[None, :] < torch.tensor([32, 20, 1])[:, None]
    soft = GumbelRouter(16, num_clusters=8, block=16, hard=False)
    hard = GumbelRouter(16, num_clusters=8, block=16, hard=True)
    hard.load_state_dict(soft.state_dict())
    real = mask.view(3, 2, 16)
    for router in (soft, hard):
        for training in (True, False):
            router.train(training)
            a = router.assignment(x, mask, tau=0.7)  # (B, nb, Lb, C)
            assert a.shape == (3, 2, 16, 8)
            assert torch.allclose(a.sum(-1)[real], torch.ones(()), atol=1e-6)
            assert (a[~real] == 0).all(), "PAD tokens join no cluster"
            if router.hard:
                assert ((a == 0) | (a == 1)).all() and (a.sum(-1)[real] == 1).all()
    soft.eval(), hard.eval()
    # eval is deterministic and noise-free: soft = softmax(logits / tau), hard = its argmax
    a_soft, a_hard = soft.assignment(x, None, tau=0.7), hard.assignment(x, None, tau=0.7)
    assert torch.equal(a_soft, soft.assignment(x, None, tau=0.7))
    assert torch.equal(a_hard.argmax(-1), a_soft.argmax(-1))
    # lower temperature = sharper rows
    assert soft.assignment(x, None, tau=0.1).amax(-1).mean() > a_soft.amax(-1).mean()


def test_hard_straight_through_passes_gradient_to_cluster_embeddings():
    torch.manual_seed(0)
    router = GumbelRouter(16, num_clusters=8, block=32, hard=True).train()
    x = torch.randn(2, 32, 16)
    reps, key_mask, assign = router.pool(x, None, tau=1.0)
    router.broadcast(reps, assign).square().sum().backward()
    assert router.cluster_emb.grad is not None and router.cluster_emb.grad.abs().sum() > 0


def test_representatives_are_assignment_weighted_means_of_real_tokens():
    torch.manual_seed(0)
    router = GumbelRouter(8, num_clusters=4, block=12, hard=False).eval()
    x = torch.randn(2, 12, 8)
    mask = torch.arange(12)[None, :] < torch.tensor([12, 7])[:, None]
    reps, key_mask, assign = router.pool(x, mask, tau=1.0)
    a = assign[:, 0]  # (B, L, C)
    expected = torch.einsum("blc,bld->bcd", a, x) / a.sum(1)[..., None]
    assert torch.allclose(reps, expected, atol=1e-6)
    assert key_mask.all()  # soft routing: every cluster gets some mass


@pytest.mark.parametrize("routing", [True, False])
@pytest.mark.parametrize(
    "pyramid,num_layers,expected", [(True, 3, [16, 8, 4]), (False, 3, [16, 16, 16]), (True, 2, [16, 8])]
)
def test_pyramid_levels_have_the_configured_cluster_counts(routing, pyramid, num_layers, expected):
    model = tiny("swarmformer_enhanced_small", routing=routing, pyramid=pyramid, num_layers=num_layers).eval()
    seen = []
    for layer in model.layers:
        layer.cluster_attn.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[1]))
    model(*right_padded_batch([64, 10], 64))
    assert seen == expected == model.cfg.cluster_counts()
    if routing:
        assert [layer.clusters.cluster_emb.shape[0] for layer in model.layers] == expected


def test_registered_cluster_counts():
    assert models.create_model("swarmformer_enhanced_small").cfg.cluster_counts() == [32, 16]
    assert models.create_model("swarmformer_enhanced_base").cfg.cluster_counts() == [192, 96]


@pytest.mark.parametrize("r", [1, 3, 8])
@pytest.mark.parametrize("L", [1, 7, 24, 50])
@pytest.mark.parametrize("masked", [False, True])
def test_window_attention_matches_dense_reference(r, L, masked):
    g = torch.Generator().manual_seed(r * 100 + L)
    q, k, v = (torch.randn(2, 3, L, 8, generator=g, requires_grad=True) for _ in range(3))
    bias = torch.randn(3, 2 * r + 1, generator=g)
    key_mask = None
    if masked:
        key_mask = torch.rand(2, L, generator=g) > 0.3
        key_mask[1] = False  # a sample with no valid key at all
    fast = sliding_window_attention(q, k, v, window_one_sided=r, key_mask=key_mask, rel_bias=bias)
    slow = dense_window_attention(q, k, v, window_one_sided=r, key_mask=key_mask, rel_bias=bias)
    assert torch.allclose(fast, slow, atol=1e-5, rtol=0)
    if masked:
        assert (fast[1] == 0).all(), "fully masked rows are zeros"
    w = torch.randn_like(fast)
    g_fast = torch.autograd.grad((fast * w).sum(), (q, k, v))
    g_slow = torch.autograd.grad((slow * w).sum(), (q, k, v))
    for a, b in zip(g_fast, g_slow):
        assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-5, rtol=0)


def test_window_attention_module_matches_dense_and_respects_window():
    torch.manual_seed(0)
    attn = LocalWindowAttention(16, heads=2, dim_head=8, window_one_sided=3).eval()
    torch.nn.init.normal_(attn.rel_bias)
    x = torch.randn(2, 30, 16)
    mask = torch.arange(30)[None, :] < torch.tensor([30, 11])[:, None]
    assert torch.allclose(attn(x, mask), dense_local_forward(attn, x, mask), atol=1e-5, rtol=0)
    # token 10's output depends on tokens 7..13 only
    y = x.clone()
    y[:, 14:] += 1.0
    y[:, :7] += 1.0
    assert torch.allclose(attn(x)[:, 10], attn(y)[:, 10], atol=1e-6)
    assert not torch.allclose(attn(x)[:, 11], attn(y)[:, 11], atol=1e-3)


def test_window_attention_memory_is_banded():
    """200k tokens: a dense score matrix would need 160 GB; the banded kernel needs a few MB."""
    q = torch.randn(1, 1, 200_000, 4)
    out = sliding_window_attention(q, q, q, window_one_sided=2)
    assert out.shape == q.shape and torch.isfinite(out).all()


def test_masked_sdpa_fully_masked_sample_gives_zeros_and_finite_grads():
    q = torch.randn(2, 2, 5, 4, requires_grad=True)
    key_mask = torch.tensor([[True, True, False, False, True], [False] * 5])
    out = masked_sdpa(q, q, q, key_mask=key_mask)
    assert (out[1] == 0).all() and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_neighbour_mean_wraps_around_real_tokens_only():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 4)
    mask = torch.tensor([[True] * 6 + [False] * 3, [True, False, True, True, False, True, False, False, True]])
    out = circular_neighbour_mean(x, mask)
    for b in range(2):
        real = mask[b].nonzero().squeeze(1)
        expected = circular_neighbour_mean(x[b : b + 1, real])[0]  # torch.roll over the real tokens
        assert torch.allclose(out[b, real], expected, atol=1e-6)
        assert torch.equal(out[b, ~mask[b]], x[b, ~mask[b]])
    assert torch.allclose(circular_neighbour_mean(x, torch.ones(2, 9, dtype=torch.bool)), circular_neighbour_mean(x))


def test_tied_qkv_has_fewer_parameters():
    tied = models.create_model("swarmformer_enhanced_small")
    untied = models.create_model("swarmformer_enhanced_small_no_tied_qkv")
    inner, D = 4 * 32, 128
    assert untied.get_num_params() - tied.get_num_params() == 2 * 2 * (D * inner + inner)  # 2 layers x (K, V)


@pytest.mark.parametrize("name,switch", sorted(ABLATIONS.items()))
def test_ablation_differs_from_the_full_model_in_exactly_its_switch(name, switch):
    full = asdict(models.create_model("swarmformer_enhanced_small", vocab_size=101).cfg)
    ablation = asdict(models.create_model(name, vocab_size=101).cfg)
    assert {k for k in full if full[k] != ablation[k]} == {switch}
    assert full[switch] is True and ablation[switch] is False


def test_temperature_anneal_builtin_schedule_and_resume():
    model = tiny("swarmformer_enhanced_small", gumbel_tau=2.0, gumbel_tau_final=0.5, gumbel_anneal_steps=4)
    ids, mask = right_padded_batch([64, 30], 64)
    taus = []
    model.train()
    for _ in range(6):
        model(ids, mask)
        taus.append(model.temperature)
    assert taus == pytest.approx([2.0, 2.0 * 0.25**0.25, 2.0 * 0.25**0.5, 2.0 * 0.25**0.75, 0.5, 0.5])
    model.eval()
    model(ids, mask)
    assert int(model.routing_step) == 6, "eval forwards do not advance the schedule"
    clone = tiny("swarmformer_enhanced_small", gumbel_tau=2.0, gumbel_tau_final=0.5, gumbel_anneal_steps=4)
    clone.load_state_dict(model.state_dict())
    assert clone.temperature == 0.5 and int(clone.routing_step) == 6
    with pytest.raises(ValueError, match="anneals its own"):
        model.set_temperature(1.0)


def test_set_temperature_changes_eval_routing_and_callback_anneals():
    model = tiny("swarmformer_enhanced_small").eval()
    ids, mask = right_padded_batch([64, 30], 64)
    before = model(ids, mask)
    model.set_temperature(0.05)
    assert not torch.allclose(model(ids, mask), before)
    cb = gumbel_anneal_callback(model, start=1.0, end=0.1, epochs=3)
    assert model.temperature == 1.0
    assert cb(SimpleNamespace(epoch=1)) is False
    assert model.temperature == pytest.approx(0.1**0.5)
    cb(SimpleNamespace(epoch=2))
    cb(SimpleNamespace(epoch=3))
    assert model.temperature == pytest.approx(0.1)
    with pytest.raises(ValueError, match="no routing"):
        gumbel_anneal_callback(tiny("swarmformer_enhanced_small_no_routing"), start=1.0, end=0.1, epochs=3)


def test_config_validation():
    with pytest.raises(ValueError, match="routing_block"):
        models.create_model("swarmformer_enhanced_small", routing_block=100)  # not a multiple of 8 * 2
    with pytest.raises(TypeError, match="unknown"):
        models.create_model("swarmformer_enhanced_small", windw=3)
    with pytest.raises(ValueError, match="routing must be true or false"):
        models.create_model("swarmformer_enhanced_small", routing=1)
    model = models.create_model("swarmformer_enhanced_small", vocab_size=101, pyramid_factors=[1, 4])
    assert model.cfg.pyramid_factors == (1, 4) and model.cfg.cluster_counts() == [32, 8]


def test_long_input_keeps_parameters_and_routes_block_locally():
    """Routing is block-local: a 4x longer input uses the same weights and 4x the clusters."""
    model = tiny("swarmformer_enhanced_small").eval()
    assert model.cfg.cluster_counts(256) == [64, 32]
    ids, _ = right_padded_batch([256], 256)
    assert model(ids).shape == (1, 2)


@pytest.mark.slow
def test_imdb_task_trains_with_the_engine_and_anneal_callback(tmp_path):
    from swarmlab.engine import TrainConfig, fit
    from tasks import get_task
    from tasks.text_data import TokenizedTextDataset

    g = torch.Generator().manual_seed(0)
    n, L = 32, 64
    ids = torch.randint(3, 101, (n, L), generator=g, dtype=torch.int32)
    labels = torch.randint(0, 2, (n,), generator=g)
    ids[:, 1] = labels.int() + 1  # a learnable cue
    lengths = torch.randint(8, L + 1, (n,), generator=g)
    data = TokenizedTextDataset(ids, lengths, labels)
    model = tiny("swarmformer_enhanced_small", dropout=0.0)
    used = []  # the temperature each epoch trained with (this callback runs before the anneal's)
    record = lambda state: used.append(model.temperature)  # noqa: E731
    anneal = gumbel_anneal_callback(model, start=1.0, end=0.25, epochs=3)
    result = fit(
        model,
        get_task("imdb"),
        data,
        data,
        TrainConfig(batch_size=8, max_epochs=3, patience=0, device="cpu", lr=3e-3),
        tmp_path,
        callbacks=(record, anneal),
    )
    assert len(result.history) == 3
    assert used == pytest.approx([1.0, 0.5, 0.25])
    assert all(torch.isfinite(torch.tensor(row["train_loss"])) for row in result.history)
