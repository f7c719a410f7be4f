"""benchmarks/step_breakdown.py: a train step split by kind of op, ours beside the reference (issue 40, items 2-3).
The attention count is exact on a known call, the kinds are sorted as documented, and the quick table has its rows."""

import importlib.util
import sys

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    "benchmarks_step_breakdown", REPO_ROOT / "benchmarks" / "step_breakdown.py"
)
step_breakdown = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(step_breakdown)


def test_attention_entries_are_counted_on_the_ops_that_run():
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4)

    class Both(torch.nn.Module):
        def forward(self, q, k):
            fused = F.scaled_dot_product_attention(q, k, k)  # SDPA: 2*3*5*7 weights, implicit
            explicit = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ k  # the same count, materialised
            return fused + explicit

    counter = step_breakdown.count_attention(Both(), (q, k))
    assert counter.scores == 2 * (2 * 3 * 5 * 7)
    assert counter.shapes == [(2, 3, 5, 7, 4)]


@pytest.mark.parametrize(
    "op, kind",
    [
        ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
        ("aten::bmm", "attention"),
        ("aten::_softmax_backward_data", "attention"),
        ("aten::_log_softmax", "other"),  # the loss, not attention
        ("aten::addmm", "matmul"),
        ("aten::mm", "matmul"),
        ("Optimizer.step#Adam.step", "optimizer"),
        ("aten::_foreach_add_", "optimizer"),
        ("aten::native_layer_norm", "other"),
    ],
)
def test_kinds_of_ops(op, kind):
    assert step_breakdown.kind_of(op) == kind


def test_quick_tables_have_ours_and_the_reference(capsys):
    step_breakdown.main(["--quick", "--only", "set_transformer_isab"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    header, *body = rows
    breakdown = [r for r in body if len(r) == len(header)]
    assert {(r[1], r[2]) for r in breakdown} == {
        ("clustering_direct", "ours"),
        ("clustering_direct", "public ISAB blocks"),
        ("clustering_mog", "ours"),
        ("clustering_mog", "public ISAB blocks"),
    }
    for r in breakdown:
        parts = [float(c.split(" ")[0]) for c in r[4:8]]
        assert sum(parts) == pytest.approx(float(r[3]), abs=4)  # the kinds share out the step (rounded ms)
        assert int(r[8].replace(",", "")) > 0  # ISAB attends in every block
    assert "| B, H, M, N, Dh |" in out and "| 2, 4, 60, 16, 8 |" in out  # our inducing points over the set
