import pytest
import torch

import models
from models.swarmformer import SwarmFormer, SwarmFormerConfig, convert_reference_state_dict, to_reference_state_dict
from swarmlab.testing.reference_swarmformer import AuthorsSwarmFormer


@pytest.mark.parametrize("name, expected", [("swarmformer_small", 4_302_850), ("swarmformer_base", 6_749_186)])
def test_parameter_counts_match_the_paper(name, expected):
    model = models.create_model(name)
    assert model.get_num_params() == expected
    d, layers = model.cfg.d_model, model.cfg.num_layers
    assert expected == 30522 * d + layers * (12 * d * d + 10 * d) + 2 * d + 2


def test_registered_configs():
    small, base = models.create_model("swarmformer_small").cfg, models.create_model("swarmformer_base").cfg
    assert (small.d_model, small.cluster_size, small.seq_len, small.t_local, small.num_layers) == (128, 8, 256, 3, 2)
    assert (base.d_model, base.cluster_size, base.seq_len, base.t_local, base.num_layers) == (192, 4, 768, 3, 2)
    assert "swarmformer_small" in models.list_models() and "swarmformer_base" in models.list_models(kind="text")


def test_seq_len_not_divisible_is_a_clear_error():
    with pytest.raises(ValueError, match="not divisible by cluster_size=8"):
        models.create_model("swarmformer_small", seq_len=100)


def test_unknown_model_and_option_errors():
    with pytest.raises(KeyError, match="unknown model 'swarmformer_smal'.*did you mean swarmformer_small"):
        models.create_model("swarmformer_smal")
    with pytest.raises(TypeError, match="unknown SwarmFormerConfig option"):
        models.create_model("swarmformer_small", d_modle=8)


def _tiny(**kw):
    cfg = dict(vocab_size=50, d_model=16, num_layers=2, t_local=2, cluster_size=4, seq_len=16, dropout=0.0)
    cfg.update(kw)
    return SwarmFormer(SwarmFormerConfig(**cfg))


def test_forward_shapes():
    model = _tiny(num_classes=3)
    ids = torch.randint(0, 50, (5, 16))
    assert model(ids).shape == (5, 3)
    assert model(ids, torch.ones(5, 16, dtype=torch.bool)).shape == (5, 3)


def test_every_parameter_receives_a_gradient():
    torch.manual_seed(0)
    model = _tiny(dropout=0.1)
    ids = torch.randint(1, 50, (4, 16))
    ids[:, 0] = torch.arange(4)  # make sure several embedding rows are used
    model(ids).logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


def test_matches_the_authors_module_layout_exactly():
    """Our model with converted weights computes what the authors' layout computes (eval mode)."""
    torch.manual_seed(0)
    theirs = AuthorsSwarmFormer(vocab_size=60, d=24, num_layers=2, t_local=3, cluster_size=4, p=0.4).eval()
    ours = SwarmFormer(
        SwarmFormerConfig(vocab_size=60, d_model=24, num_layers=2, t_local=3, cluster_size=4, seq_len=32, dropout=0.4)
    ).eval()
    ours.load_state_dict(convert_reference_state_dict(theirs.state_dict()))
    ids = torch.randint(0, 60, (3, 32))
    torch.testing.assert_close(ours(ids), theirs(ids), rtol=0, atol=1e-6)


def test_train_mode_matches_the_authors_dropout_placement():
    """Same RNG stream, same dropout calls in the same order: identical outputs in train mode too."""
    torch.manual_seed(0)
    theirs = AuthorsSwarmFormer(vocab_size=60, d=16, num_layers=2, t_local=2, cluster_size=4, p=0.3).train()
    cfg = dict(vocab_size=60, d_model=16, num_layers=2, t_local=2, cluster_size=4, seq_len=16, dropout=0.3)
    if "fast" in SwarmFormerConfig.__dataclass_fields__:
        cfg["fast"] = False  # the plain path: dropout calls in the authors' order
    ours = SwarmFormer(SwarmFormerConfig(**cfg)).train()
    ours.load_state_dict(convert_reference_state_dict(theirs.state_dict()))
    ids = torch.randint(0, 60, (3, 16))
    torch.manual_seed(123)
    a = theirs(ids)
    torch.manual_seed(123)
    b = ours(ids)
    torch.testing.assert_close(b, a, rtol=0, atol=1e-6)


def test_reference_state_dict_round_trip():
    model = models.create_model("swarmformer_small")
    theirs = to_reference_state_dict(model.state_dict())
    assert "embedding.embed.weight" in theirs and "layers.1.global_attn.value.bias" in theirs
    assert "layers.0.local_agg.mlp.3.weight" in theirs and "layers.1.broadcast.gate_net.2.bias" in theirs
    back = convert_reference_state_dict(theirs)
    assert back.keys() == model.state_dict().keys()
    for k, v in model.state_dict().items():
        assert torch.equal(back[k], v)
    fresh = models.create_model("swarmformer_small")
    fresh.load_state_dict(back)  # strict


def test_convert_rejects_unknown_and_missing_keys():
    theirs = to_reference_state_dict(models.create_model("swarmformer_small", vocab_size=50).state_dict())
    with pytest.raises(KeyError, match="unexpected key 'layers.0.local_agg.extra.weight'"):
        convert_reference_state_dict({**theirs, "layers.0.local_agg.extra.weight": torch.zeros(1)})
    missing = dict(theirs)
    del missing["classifier.bias"]
    with pytest.raises(KeyError, match="missing key"):
        convert_reference_state_dict(missing)
    partial = dict(theirs)
    del partial["layers.1.global_attn.key.weight"]
    with pytest.raises(KeyError, match="incomplete layer"):
        convert_reference_state_dict(partial)
    gap = {k: v for k, v in theirs.items() if not k.startswith("layers.0.")}
    with pytest.raises(KeyError, match="layer indices"):
        convert_reference_state_dict(gap)


def test_circular_neighbour_rule_first_token_sees_last():
    """The authors roll the sequence: token 0's neighbour mean includes token L-1."""
    torch.manual_seed(0)
    model = _tiny().eval()
    local = model.layers[0].local
    x = torch.randn(1, 16, 16)
    y = x.clone()
    y[0, -1] += 1.0  # perturb only the last token
    out_x, out_y = local(x), local(y)
    assert not torch.allclose(out_x[0, 0], out_y[0, 0]), "first token must depend on the last (wrap-around)"
    assert torch.allclose(out_x[0, 1:-2], out_y[0, 1:-2]), "tokens 1..L-3 are not neighbours of token L-1"


def test_reference_ignores_attention_mask_and_pools_over_pad():
    """As the authors: the mask is accepted but unused, so PAD changes the logits."""
    torch.manual_seed(0)
    model = _tiny().eval()
    ids = torch.randint(1, 50, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.bool)
    mask[0, 8:] = False
    torch.testing.assert_close(model(ids), model(ids, mask))
    padded = ids.clone()
    padded[0, 8:] = 0
    assert not torch.allclose(model(ids), model(padded))
