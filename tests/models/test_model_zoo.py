"""Every registered text model, on a tiny config: forward, backward, gradients, padding invariance.

A new model is covered without editing this file when its config accepts the common tiny keys below
(unknown keys are dropped per model); a model with other size constraints adds an entry to TINY_EXTRA.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
import torch.nn.functional as F

import models

TEXT_MODELS = models.list_models(kind="text")

# Common tiny sizes; each model keeps only the keys its config has. Lengths used below (32, 64) are
# multiples of every size that must divide them (cluster_size 4, window 4, block 8).
TINY = dict(
    vocab_size=100,
    num_classes=3,
    d_model=16,
    seq_len=32,
    num_layers=1,
    num_heads=2,
    t_local=1,
    cluster_size=4,
    window_one_sided=4,
    block=8,
    summary=2,
)
TINY_EXTRA: dict[str, dict] = {  # name -> extra or replacing overrides, for constraints TINY does not meet
    # HSW has per-stage depths and heads and a window of W tokens: 2 stages of 2 blocks (plain + shifted)
    **{name: dict(depths=(2, 2), heads=(2, 2), window=8, embed_dim=16) for name in ("hsw_base", "hsw_small")},
}
PAD = 0


@functools.lru_cache(maxsize=None)
def config_fields(name: str) -> frozenset[str]:
    cfg = models.create_model(name).cfg
    assert dataclasses.is_dataclass(cfg), f"{name}: model.cfg must be a config dataclass"
    return frozenset(f.name for f in dataclasses.fields(cfg))


def tiny_overrides(name: str, **changes) -> dict:
    fields = config_fields(name)
    missing = {"vocab_size", "num_classes", "seq_len"} - fields
    assert not missing, f"{name}: a text model's config must have {sorted(missing)}"
    out = {k: v for k, v in TINY.items() if k in fields}
    return {**out, **TINY_EXTRA.get(name, {}), **changes}


def tiny_model(name: str, **changes) -> torch.nn.Module:
    torch.manual_seed(0)
    return models.create_model(name, **tiny_overrides(name, **changes))


def ignores_mask(name: str) -> bool:
    return "ignores_mask" in models.model_entry(name).tags


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_forward_backward_every_parameter_gets_a_finite_gradient(name):
    model = tiny_model(name).train()
    B, L = 3, model.cfg.seq_len
    ids = torch.randint(1, 100, (B, L), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[1, L // 2 :] = False
    ids[~mask] = PAD
    logits = model(ids, mask)
    assert logits.shape == (B, 3)
    assert torch.isfinite(logits).all()
    F.cross_entropy(logits, torch.tensor([0, 1, 2])).backward()
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not no_grad, f"{name}: parameters without a gradient: {no_grad}"
    bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not bad, f"{name}: non-finite gradients in {bad}"
    assert sum(p.grad.abs().sum() for p in model.parameters()) > 0
    assert model.get_num_params() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_forward_without_mask(name):
    model = tiny_model(name).eval()
    with torch.no_grad():
        out = model(torch.randint(1, 100, (2, model.cfg.seq_len)))
    assert out.shape == (2, 3) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", [n for n in TEXT_MODELS if not ignores_mask(n)])
@pytest.mark.parametrize("real,total", [(32, 64), (16, 64), (64, 64)])
def test_padding_does_not_change_the_logits(name, real, total):
    """Eval mode: appending PAD (mask False) to a sequence, or changing the PAD ids, leaves the logits."""
    model = tiny_model(name, seq_len=64).eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, 100, (2, real), generator=g)
    padded = torch.cat([ids, torch.full((2, total - real), PAD)], dim=1)
    mask = torch.zeros(2, total, dtype=torch.bool)
    mask[:, :real] = True
    noisy = padded.clone()
    noisy[~mask] = torch.randint(1, 100, (int((~mask).sum()),), generator=g)
    with torch.no_grad():
        short = model(ids, torch.ones(2, real, dtype=torch.bool))
        long = model(padded, mask)
        long_noisy = model(noisy, mask)
    torch.testing.assert_close(long, short, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(long_noisy, long, atol=1e-5, rtol=1e-5)


MASK_IGNORING = [n for n in TEXT_MODELS if ignores_mask(n)]


def test_the_reference_swarmformer_is_tagged_as_ignoring_the_mask():
    assert {"swarmformer_small", "swarmformer_base"} <= set(MASK_IGNORING)


@pytest.mark.parametrize("name", MASK_IGNORING)
def test_models_tagged_ignores_mask_do_depend_on_padding(name):
    """Justifies the exclusion above: for these models padding changes the logits (by design)."""
    model = tiny_model(name, seq_len=64).eval()
    ids = torch.randint(1, 100, (2, 32), generator=torch.Generator().manual_seed(3))
    padded = torch.cat([ids, torch.full((2, 32), PAD)], dim=1)
    mask = torch.cat([torch.ones(2, 32, dtype=torch.bool), torch.zeros(2, 32, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        short, long = model(ids, torch.ones(2, 32, dtype=torch.bool)), model(padded, mask)
    assert (short - long).abs().max() > 1e-4, f"{name} is tagged ignores_mask but padding does not change its logits"


def test_tiny_overrides_keep_only_the_keys_a_model_accepts():
    sf = tiny_overrides("swarmformer_small")
    assert sf["cluster_size"] == 4 and "num_heads" not in sf and "window_one_sided" not in sf
    lf = tiny_overrides("longformer")
    assert lf["window_one_sided"] == 4 and "cluster_size" not in lf


def test_an_architecture_in_several_sizes_names_every_size():
    """`<arch>_<size>` wherever an architecture is registered in more than one size (swarmformer_small and _base,
    hsw_small and _base, swarm_transformer_small and _base): a bare name never sits beside its sized siblings.
    One-size baselines (transformer, longformer, swarm, lstm, ...) keep their names."""
    names = set(models.list_models())
    for name in sorted(names):
        for size in ("small", "base"):
            if name.endswith(f"_{size}"):
                arch = name.removesuffix(f"_{size}")
                assert arch not in names, f"{arch!r} is registered beside {name!r}: name it {arch}_<size>"
                assert f"{arch}_small" in names and f"{arch}_base" in names, f"{name!r} has no sibling size"
