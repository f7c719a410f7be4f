"""SWARM set model (models/swarm.py): shapes, gradients, equivariance, padding, causality, fast == plain,
and parity with a transcription of the authors' layer (swarmlab/testing/reference_swarm.py)."""

from __future__ import annotations

import pytest
import torch

import models
from models.swarm import Swarm, SwarmConfig, convert_reference_state_dict
from swarmlab.testing.reference_swarm import authors_swarm

TINY = dict(dim_input=3, dim_output=4, dim_hidden=8, n_iter=3)


@pytest.fixture
def one_thread():
    """The blocks of whole sets run with one intra-op thread only (models.layers.swarm_recurrence.effective_block_rows)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(**kw) -> Swarm:
    torch.manual_seed(0)
    return models.create_model("swarm", **{**TINY, **kw})


def random_mask(B: int, N: int, seed: int, *, at_end: bool = False) -> torch.Tensor:
    """Random sizes 1..N per set; padding at random places, or only at the end."""
    g = torch.Generator().manual_seed(seed)
    if at_end:
        sizes = torch.randint(1, N + 1, (B,), generator=g)
        return torch.arange(N)[None, :] < sizes[:, None]  # (B, N)
    mask = torch.rand(B, N, generator=g) < 0.6
    mask[:, 0] = True  # every set keeps at least one real entity
    return mask[:, torch.randperm(N, generator=g)]


def test_registered_and_defaults_are_the_seeds_best():
    assert "swarm" in models.list_models(kind="set")
    model = models.create_model("swarm")
    cfg = model.cfg
    assert (cfg.dim_hidden, cfg.n_iter, cfg.num_layers, cfg.pooling, cfg.dropout) == (192, 10, 1, "mean", 0.0)
    assert model.get_num_params() == Swarm.expected_num_params(cfg) == 301_066


@pytest.mark.parametrize("pooling", ["mean", "max", "causal"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_shapes_and_pooling_head(pooling, num_layers):
    x = torch.randn(2, 5, 3)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    assert tiny(pooling=pooling, num_layers=num_layers)(x, mask).shape == (2, 5, 4)
    assert tiny(pooling=pooling, num_layers=num_layers)(x).shape == (2, 5, 4)
    assert tiny(pooling=pooling, num_layers=num_layers, head="mean")(x, mask).shape == (2, 4)


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="pooling must be one of"):
        tiny(pooling="sum")
    with pytest.raises(ValueError, match="head must be one of"):
        tiny(head="max")
    with pytest.raises(TypeError, match="unknown SwarmConfig option"):
        tiny(hidden=3)
    with pytest.raises(ValueError, match="dim_input=3"):
        tiny()(torch.randn(2, 5, 2))
    with pytest.raises(ValueError, match="bool tensor"):
        tiny()(torch.randn(2, 5, 3), torch.ones(2, 5))
    with pytest.raises(ValueError, match="padding is only allowed at the end"):
        tiny(pooling="causal")(torch.randn(1, 4, 3), torch.tensor([[True, False, True, False]]))


@pytest.mark.parametrize("pooling", ["mean", "max", "causal"])
@pytest.mark.parametrize("fast", [True, False])
def test_every_parameter_gets_a_gradient(pooling, fast):
    model = tiny(pooling=pooling, fast=fast, num_layers=2, dropout=0.1).train()
    x = torch.randn(3, 6, 3)
    mask = random_mask(3, 6, seed=1, at_end=pooling == "causal")
    (model(x, mask) * torch.randn(3, 6, 4)).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


@pytest.mark.parametrize("pooling", ["mean", "max", "causal"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("block_rows", [0, 7, 21])  # 4 sets of 7: one block; 4 blocks of 1 set; blocks of 3 + 1
def test_fast_path_equals_plain_reference_values_and_gradients(pooling, dropout, block_rows, one_thread):
    """The hand-written backward against autograd through the plain equations (float64, same dropout draws)."""
    plain = tiny(pooling=pooling, fast=False, num_layers=2, dropout=dropout).double().train()
    fast = tiny(pooling=pooling, fast=True, num_layers=2, dropout=dropout, block_rows=block_rows).double().train()
    fast.load_state_dict(plain.state_dict())
    mask = random_mask(4, 7, seed=2, at_end=pooling == "causal")
    mask[3] = False  # an empty set (mean / max pool it to 0)
    weight = torch.randn(4, 7, 4, dtype=torch.float64)
    results = []
    for model in (plain, fast):
        x = torch.randn(4, 7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).requires_grad_()
        torch.manual_seed(4)  # same dropout masks
        y = model(x, mask)
        grads = torch.autograd.grad((y * weight).sum(), [x, *model.parameters()])
        results.append([y, *grads])
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("pooling", ["mean", "max"])
@pytest.mark.parametrize("fast, block_rows", [(True, 0), (True, 9), (True, 1024), (False, 0)])
def test_permutation_equivariance_with_padding(pooling, fast, block_rows, one_thread):
    model = tiny(pooling=pooling, fast=fast, num_layers=2, block_rows=block_rows).eval()
    x = torch.randn(3, 9, 3)
    mask = random_mask(3, 9, seed=5)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(6))
    y = model(x, mask)
    torch.testing.assert_close(model(x[:, perm], mask[:, perm]), y[:, perm], rtol=0, atol=1e-5)
    head = tiny(pooling=pooling, fast=fast, head="mean")
    torch.testing.assert_close(head(x[:, perm], mask[:, perm]), head(x, mask), rtol=0, atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "max", "causal"])
@pytest.mark.parametrize("fast", [True, False])
def test_padding_values_do_not_change_real_outputs(pooling, fast):
    model = tiny(pooling=pooling, fast=fast, num_layers=2).eval()
    x = torch.randn(3, 8, 3)
    mask = random_mask(3, 8, seed=7, at_end=pooling == "causal")
    noisy = torch.where(mask[..., None], x, 100 * torch.randn(3, 8, 3))
    torch.testing.assert_close(model(noisy, mask)[mask], model(x, mask)[mask], rtol=0, atol=1e-5)
    # and a padded set gives what the same set without padding gives
    short = model(x[:1][:, mask[0]])  # (1, n_real, 4)
    torch.testing.assert_close(model(noisy[:1], mask[:1])[0, mask[0]], short[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("fast", [True, False])
def test_causal_output_at_i_ignores_later_inputs(fast):
    model = tiny(pooling="causal", fast=fast, num_layers=2).eval()
    x = torch.randn(2, 7, 3)
    y = model(x)
    for i in range(7):
        changed = x.clone()
        changed[:, i + 1 :] = torch.randn(2, 6 - i, 3)
        torch.testing.assert_close(model(changed)[:, : i + 1], y[:, : i + 1], rtol=0, atol=1e-6)
        if i < 6:  # a later change does reach later outputs: the test can fail
            assert not torch.allclose(model(changed)[:, i + 1 :], y[:, i + 1 :])


@pytest.mark.parametrize("pooling", ["mean", "max", "causal"])
def test_blocked_fast_path_equals_the_unblocked_one_in_fp32(pooling, one_thread):
    """Blocks of whole sets (issue 19) against the fast path before them (``block_rows=0``) and the plain path:
    fp32 outputs and gradients, padded sets (an empty one too), train mode with and without grad, eval."""
    B, N = 7, 40
    kw = dict(dim_input=3, dim_output=5, dim_hidden=16, n_iter=4, num_layers=2, pooling=pooling)
    mask = random_mask(B, N, seed=10, at_end=pooling == "causal")
    if pooling != "causal":
        mask[5] = False  # an empty set
    x = torch.randn(B, N, 3, generator=torch.Generator().manual_seed(11))
    weight = torch.randn(B, N, 5, generator=torch.Generator().manual_seed(12))
    results = {}
    for name, extra in (("plain", dict(fast=False)), ("whole", dict(block_rows=0)), ("blocks", dict(block_rows=90))):
        torch.manual_seed(0)
        model = Swarm(SwarmConfig(**kw, **extra)).train()
        xr = x.clone().requires_grad_()
        y = model(xr, mask)
        grads = torch.autograd.grad((y * weight).sum(), [xr, *model.parameters()])
        with torch.no_grad():
            inference = model.eval()(x, mask)
        results[name] = [y, *grads, inference]
    assert (
        len(results["blocks"]) == len(results["whole"]) == 3 + len(list(model.parameters()))
    )  # y, d x, d params, inference
    for a, b, c in zip(results["plain"], results["whole"], results["blocks"]):
        torch.testing.assert_close(c, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, a, rtol=1e-4, atol=1e-5)


def test_set_blocks_cover_every_set_once():
    from models.layers.swarm_recurrence import effective_block_rows, set_blocks

    assert set_blocks(50, 100, 1024) == [(b, min(50, b + 10)) for b in range(0, 50, 10)]
    assert set_blocks(4, 7, 0) == [(0, 4)]
    assert set_blocks(3, 2000, 1024) == [(0, 1), (1, 2), (2, 3)]  # a set larger than a block is one block
    assert set_blocks(5, 7, 21) == [(0, 3), (3, 5)]
    assert effective_block_rows(1024, 1) == 1024 and effective_block_rows(1024, 2) == 0  # blocks: one thread only
    with pytest.raises(ValueError, match="block_rows"):
        tiny(block_rows=-1)


def test_causal_step_matches_the_full_forward():
    model = tiny(pooling="causal", num_layers=2).eval()
    x = torch.randn(3, 6, 3)
    with torch.no_grad():
        full = model(x)
        states = model.init_causal_state(3)
        steps = torch.stack([model.causal_step(x[:, i], states) for i in range(6)], dim=1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


def test_empty_set_pools_to_zero_not_nan():
    for pooling in ("mean", "max"):
        y = tiny(pooling=pooling, head="mean")(torch.randn(2, 4, 3), torch.tensor([[False] * 4, [True] * 4]))
        assert torch.isfinite(y).all() and (y[0] == 0).all()


# ---- parity with the authors' layer ------------------------------------------------------------------------


# their code has 'MEAN' and 'CAUSAL' (no max); their CAUSAL ignores a mask, so it is compared without one
@pytest.mark.parametrize("pooling, use_mask", [("mean", False), ("mean", True), ("causal", False)])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("fast", [True, False])
def test_parity_with_the_authors_layer(pooling, use_mask, num_layers, fast):
    torch.manual_seed(0)
    theirs = authors_swarm(3, 4, 8, 3, n_layers=num_layers, pooling=pooling.upper(), cache=True).eval()
    ours = Swarm(SwarmConfig(**TINY, num_layers=num_layers, pooling=pooling, fast=fast)).eval()
    ours.load_state_dict(convert_reference_state_dict(theirs.state_dict()))
    x = torch.randn(4, 9, 3)
    mask = random_mask(4, 9, seed=8) if use_mask else None
    torch.testing.assert_close(ours(x, mask), theirs(x, mask), rtol=0, atol=1e-5)


def test_convert_reference_state_dict_shapes_and_errors():
    theirs = authors_swarm(3, 4, 8, 3, n_layers=2).state_dict()
    assert theirs["mods.0.cell.Wih.weight"].shape == (32, 3, 1)
    ours = convert_reference_state_dict(theirs)
    assert ours["layers.1.cell.w_hh.weight"].shape == (32, 8) and ours["layers.1.out.weight"].shape == (4, 16)
    with pytest.raises(KeyError, match="unexpected key 'mods.1.cell.Wih.weight'"):
        convert_reference_state_dict({"mods.1.cell.Wih.weight": theirs["mods.0.cell.Wih.weight"]})
    with pytest.raises(KeyError, match="missing key"):
        convert_reference_state_dict({k: v for k, v in theirs.items() if k != "mods.2.ffwd.bias"})
    with pytest.raises(KeyError, match="matches no SwarmLayer tensor"):
        convert_reference_state_dict({**theirs, "cell.Wxx.weight": theirs["mods.0.cell.Wih.weight"]})
    with pytest.raises(ValueError, match="kernel-1 Conv1d weight"):
        convert_reference_state_dict({**theirs, "mods.0.cell.Whh.weight": theirs["mods.0.cell.Whh.weight"][..., 0]})


def test_fast_path_under_bf16_autocast_runs_the_recurrence_in_fp32():
    model = tiny(pooling="mean").train()
    x, mask = torch.randn(2, 6, 3), random_mask(2, 6, seed=9)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x, mask)
    y.float().sum().backward()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    torch.testing.assert_close(y.float(), model(x, mask), rtol=0, atol=5e-2)  # bf16 matmuls in W_ih and out
