"""The fast SwarmFormer path computes the plain reference's function (fp32, 1e-5), keeps its parameters,
and keeps the neighbour rules: circular for the authors' model, no wrap-around when padding-aware."""

import pytest
import torch

import models
from models.swarmformer import (
    SwarmFormer,
    SwarmFormerConfig,
    _neighbour_sum,
    _neighbour_sum_functional,
    _NeighbourSum,
    _PadInfo,
    convert_reference_state_dict,
    to_reference_state_dict,
)

# tiny configs shaped like the two registered ones: Small (S=8, C=L/8) and Base (S=4, more clusters)
SMALL_LIKE = dict(vocab_size=97, d_model=32, num_layers=2, t_local=3, cluster_size=8, seq_len=64, dropout=0.4)
BASE_LIKE = dict(vocab_size=97, d_model=48, num_layers=2, t_local=3, cluster_size=4, seq_len=96, dropout=0.4)


def _pair(cfg: dict, *, padding_aware: bool, seed: int = 0, **kw) -> tuple[SwarmFormer, SwarmFormer]:
    """A reference and a fast model with the same random (not default-init) weights."""
    torch.manual_seed(seed)
    ref = SwarmFormer(SwarmFormerConfig(**{**cfg, **kw}, padding_aware=padding_aware, fast=False))
    with torch.no_grad():
        for name, p in ref.named_parameters():
            # larger than the default init so that every block moves the state and logits are O(1)
            p.normal_(0.0, 1.0 if p.ndim < 2 or name.startswith("head") else p.shape[1] ** -0.5)
    fast = SwarmFormer(SwarmFormerConfig(**{**cfg, **kw}, padding_aware=padding_aware, fast=True))
    fast.load_state_dict(ref.state_dict())  # strict: the same parameter names and shapes
    return ref, fast


def _inputs(cfg: dict, batch: int = 4, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    L = cfg["seq_len"]
    ids = torch.randint(1, cfg["vocab_size"], (batch, L), generator=g)
    mask = torch.ones(batch, L, dtype=torch.bool)
    mask[1, L // 2 + 3 :] = False  # a partly-PAD cluster and all-PAD clusters
    mask[2, 5:] = False  # mostly PAD
    mask[3, 1:] = False  # a single real token
    ids[~mask] = 0
    return ids, mask


@pytest.mark.parametrize("cfg", [SMALL_LIKE, BASE_LIKE], ids=["small_like", "base_like"])
@pytest.mark.parametrize("padding_aware", [False, True])
def test_fast_matches_reference_in_eval(cfg, padding_aware):
    ref, fast = _pair(cfg, padding_aware=padding_aware)
    ref.eval(), fast.eval()
    ids, mask = _inputs(cfg)
    with torch.no_grad():
        expected, got = ref(ids, mask), fast(ids, mask)
        assert expected.abs().max() > 0.5, "logits too small for a 1e-5 comparison to mean anything"
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(fast(ids), ref(ids), rtol=1e-5, atol=1e-5)  # attention_mask=None


@pytest.mark.parametrize("cfg", [SMALL_LIKE, BASE_LIKE], ids=["small_like", "base_like"])
@pytest.mark.parametrize("padding_aware", [False, True])
def test_fast_matches_reference_outputs_and_gradients_in_train_mode(cfg, padding_aware):
    ref, fast = _pair(cfg, padding_aware=padding_aware, dropout=0.0)
    ref.train(), fast.train()
    ids, mask = _inputs(cfg)
    target = torch.tensor([0, 1, 1, 0])
    outs = []
    for model in (ref, fast):
        out = model(ids, mask)
        torch.nn.functional.cross_entropy(out, target).backward()
        outs.append(out.detach())
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for (name, p_ref), (_, p_fast) in zip(ref.named_parameters(), fast.named_parameters()):
        assert p_ref.grad is not None and p_fast.grad is not None, name
        torch.testing.assert_close(p_fast.grad, p_ref.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    assert any(p.grad.abs().max() > 1e-3 for p in fast.parameters())


@pytest.mark.parametrize(
    "name, expected",
    [
        ("swarmformer_small", 4_302_850),
        ("swarmformer_base", 6_749_186),
        ("swarmformer_small_padaware", 4_302_850),
        ("swarmformer_base_padaware", 6_749_186),
    ],
)
def test_both_paths_keep_parameter_names_and_counts(name, expected):
    fast, ref = models.create_model(name), models.create_model(name, fast=False)
    assert fast.cfg.fast and not ref.cfg.fast, "the registered default is the fast path"
    assert fast.get_num_params() == ref.get_num_params() == expected
    assert fast.state_dict().keys() == ref.state_dict().keys()
    ref.load_state_dict(convert_reference_state_dict(to_reference_state_dict(fast.state_dict())))  # strict


def test_fast_path_every_parameter_receives_a_gradient_with_dropout():
    torch.manual_seed(0)
    model = SwarmFormer(SwarmFormerConfig(**SMALL_LIKE)).train()
    ids, _ = _inputs(SMALL_LIKE)
    model(ids).logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


def test_fast_path_dropout_is_active_in_train_mode_only():
    _, fast = _pair(SMALL_LIKE, padding_aware=False)
    ids, _ = _inputs(SMALL_LIKE)
    fast.train()
    assert not torch.allclose(fast(ids), fast(ids)), "train mode must drop"
    fast.eval()
    torch.testing.assert_close(fast(ids), fast(ids), rtol=0, atol=0)


@pytest.mark.parametrize("fast", [False, True])
def test_cluster_attention_drops_weights_and_output(fast):
    """Dropout on the attention weights and on the output, as the authors (SDPA's dropout_p is the first).

    With every value row equal to 1, ``A @ v`` is exactly 1 without weight dropout; with it, the kept
    outputs spread around 1/(1-p). Output dropout zeroes a fraction p. The mean stays 1 (unbiased).
    """
    torch.manual_seed(0)
    p = 0.4
    model = SwarmFormer(SwarmFormerConfig(**SMALL_LIKE, fast=fast))
    attn = model.layers[0].cluster_attn.train()
    with torch.no_grad():
        attn.v_proj.weight.zero_()
        attn.v_proj.bias.fill_(1.0)
        out = torch.cat([attn(torch.randn(64, 8, 32)) for _ in range(10)])  # (640, 8, 32)
    nonzero = out[out != 0]
    assert abs((out == 0).float().mean().item() - p) < 0.02  # output dropout (+ p^8 all-weights-dropped)
    assert nonzero.std() > 0.2, "no weight dropout: kept outputs would all equal 1/(1-p)"
    assert abs(out.mean().item() - 1.0) < 0.02
    attn.eval()
    with torch.no_grad():
        torch.testing.assert_close(attn(torch.randn(4, 8, 32)), torch.ones(4, 8, 32))


@pytest.mark.parametrize("circular", [True, False])
@pytest.mark.parametrize("L", [1, 2, 3, 7])
def test_neighbour_sum_kernel(circular, L):
    x = torch.randn(2, L, 5, dtype=torch.float64, requires_grad=True)
    if circular:
        expected = torch.roll(x, 1, 1) + x + torch.roll(x, -1, 1)
    else:
        pad = torch.nn.functional.pad
        expected = pad(x[:, :-1], (0, 0, 1, 0)) + x + pad(x[:, 1:], (0, 0, 0, 1))
    torch.testing.assert_close(_neighbour_sum(x.detach(), circular), expected.detach())
    torch.testing.assert_close(_neighbour_sum_functional(x.detach(), circular), expected.detach())
    assert torch.autograd.gradcheck(lambda t: _NeighbourSum.apply(t, circular), (x,))


@pytest.mark.parametrize("padding_aware", [False, True])
def test_fast_path_traces_as_one_graph(padding_aware):
    """torch.compile sees the whole forward: no graph break (the in-place neighbour sum used to split it in 9)."""
    _, fast = _pair(SMALL_LIKE, padding_aware=padding_aware)
    ids, mask = _inputs(SMALL_LIKE)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fast.train())(ids, mask)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    assert explained.graph_count == 1


@pytest.mark.parametrize("padding_aware", [False, True])
def test_compiled_fast_path_matches_eager_outputs_and_gradients(padding_aware):
    """The traced path (functional neighbour sum, the custom autograd's backward traced too) computes what eager
    does; aot_eager runs the traced graphs without inductor's code generation, which the parity does not need."""
    _, fast = _pair(SMALL_LIKE, padding_aware=padding_aware, dropout=0.0)
    ids, mask = _inputs(SMALL_LIKE)
    target = torch.tensor([0, 1, 1, 0])
    torch._dynamo.reset()
    outs, grads = [], []
    for model in (fast.train(), torch.compile(fast, backend="aot_eager", fullgraph=True)):
        fast.zero_grad(set_to_none=True)
        out = model(ids, mask)
        torch.nn.functional.cross_entropy(out, target).backward()
        outs.append(out.detach())
        grads.append({n: p.grad.clone() for n, p in fast.named_parameters()})
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("fast", [False, True])
def test_circular_neighbour_rule_first_token_sees_last(fast):
    """The authors' local step (both paths): token 0's neighbour mean includes token L-1."""
    torch.manual_seed(0)
    model = SwarmFormer(SwarmFormerConfig(**SMALL_LIKE, fast=fast)).eval()
    local = model.layers[0].local
    x = torch.randn(2, 64, 32)
    y = x.clone()
    y[:, -1] += 1.0  # perturb only the last token
    with torch.no_grad():
        out_x, out_y = local(x), local(y)
    assert not torch.allclose(out_x[:, 0], out_y[:, 0]), "first token must depend on the last (wrap-around)"
    torch.testing.assert_close(out_x[:, 1:-2], out_y[:, 1:-2], rtol=0, atol=0)  # not neighbours of L-1


@pytest.mark.parametrize("fast", [False, True])
def test_padding_aware_local_step_has_no_wrap_around(fast):
    torch.manual_seed(0)
    model = SwarmFormer(SwarmFormerConfig(**SMALL_LIKE, padding_aware=True, fast=fast)).eval()
    local = model.layers[0].local
    pad = _PadInfo(torch.ones(2, 64, dtype=torch.bool), cluster_size=8, dtype=torch.float32)
    x = torch.randn(2, 64, 32)
    y = x.clone()
    y[:, -1] += 1.0
    z = x.clone()
    z[:, 1] += 1.0
    with torch.no_grad():
        out_x, out_y, out_z = local(x, pad), local(y, pad), local(z, pad)
    torch.testing.assert_close(out_x[:, :-2], out_y[:, :-2], rtol=0, atol=0)  # token 0 ignores token L-1
    assert not torch.allclose(out_x[:, -2:], out_y[:, -2:])
    assert not torch.allclose(out_x[:, 0], out_z[:, 0]), "token 0 must still see token 1"


def test_fast_path_runs_under_bf16_autocast_close_to_fp32():
    """The engine's amp=True path: both paths run under CPU bf16 autocast and stay near fp32."""
    ref, fast = _pair(SMALL_LIKE, padding_aware=True)
    ids, mask = _inputs(SMALL_LIKE)
    for model in (ref, fast):
        model.eval()
        with torch.no_grad():
            full = model(ids, mask)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                half = model(ids, mask)
        assert torch.isfinite(half).all()
        torch.testing.assert_close(half.float(), full, rtol=0.05, atol=0.05 * full.abs().max().item())
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(ids, mask).float().sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_config_rejects_non_bool_switches():
    with pytest.raises(ValueError, match="fast must be true or false"):
        SwarmFormerConfig(fast=1)
    with pytest.raises(ValueError, match="padding_aware must be true or false"):
        SwarmFormerConfig(padding_aware="yes")
