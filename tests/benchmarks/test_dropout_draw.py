"""benchmarks/dropout_draw.py: our model with the house Dropout against the same model with nn.Dropout's draw (issue
40). The swap reaches every dropout module and changes nothing but the draw; the quick table times only the rows that
drop something."""

import importlib.util
import sys

import torch
import torch.nn as nn

import models
from models.layers.drop import Dropout
from tests.conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location("benchmarks_dropout_draw", REPO_ROOT / "benchmarks" / "dropout_draw.py")
dropout_draw = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(dropout_draw)


def test_the_swap_reaches_every_dropout_and_keeps_the_function():
    torch.manual_seed(0)
    model = models.create_model("longformer", vocab_size=50, seq_len=32, d_model=16, num_heads=2, num_layers=2)
    house = sum(isinstance(m, Dropout) for m in model.modules())
    ids, mask = torch.randint(3, 50, (2, 32)), torch.ones(2, 32, dtype=torch.bool)
    expected = model.eval()(ids, mask)
    assert dropout_draw.with_nn_dropout(model) == house > 0
    assert not any(isinstance(m, Dropout) for m in model.modules())
    assert sum(type(m) is nn.Dropout for m in model.modules()) == house
    torch.testing.assert_close(model.eval()(ids, mask), expected, rtol=0, atol=0)  # eval: dropout is the identity
    model.train()
    torch.manual_seed(1)
    a = model(ids, mask)
    torch.manual_seed(1)
    assert torch.equal(model(ids, mask), a)  # nn.Dropout's masks, seeded


def test_quick_table_times_the_rows_that_drop_something(capsys):
    dropout_draw.main(["--quick", "--only", "transformer,set_linear_mean"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| transformer ")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith("x")
    assert "not timed: set_linear_mean (clustering_direct)" in out
