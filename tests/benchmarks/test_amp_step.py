"""benchmarks/amp_step.py: each model's train step in fp32 against bf16 autocast on the CPU, beside the precision the
profile's ``amp`` gives it here. The speed-up is fp32 over bf16 time; the output gap is relative to the fp32 output;
the profile column resolves ``auto`` on this CPU."""

import importlib.util
import sys

import pytest
import torch

from swarmlab.drive.params import load_params
from swarmlab.engine.device import native_bf16
from tests.conftest import REPO_ROOT

# benchmarks/ is a folder of scripts, not a package: load the script as a module
_spec = importlib.util.spec_from_file_location("benchmarks_amp_step", REPO_ROOT / "benchmarks" / "amp_step.py")
amp_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(amp_step)


def rows_of(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]


def test_speed_up_is_fp32_over_bf16_and_the_profile_column_resolves_auto_here():
    claims = load_params(profile="claims")
    rows = amp_step.family_step.resolve_rows(claims, {"swarm", "swarm_transformer_small"}, quick=True)
    res = {"gap": {}, "times": {}}
    for i, (fp32, bf16) in enumerate([(0.100, 0.050), (0.060, 0.080), (0.040, 0.040)]):
        res["gap"][i] = 1e-3
        res["times"][i, "fp32"], res["times"][i, "bf16"] = [fp32, 9.0, fp32], [bf16, 0.0, bf16]  # medians
    header, *body = rows_of(amp_step.table(rows, res, claims))
    col = {name: header.index(name) for name in ("model", "task", "bf16 speed-up", "profile amp")}
    assert [r[col["model"]] for r in body] == ["swarm", "swarm", "swarm_transformer_small"]  # family_step's order
    assert [r[col["bf16 speed-up"]] for r in body] == ["2.00x", "0.75x", "1.00x"]
    here = "bf16" if native_bf16(torch.device("cpu")) else "fp32"
    assert body[0][col["profile amp"]] == f"auto = {here}"  # the set tasks train at amp: auto in the claims profile
    assert body[2][col["profile amp"]] == "fp32"  # the image model is pinned to fp32 there


def test_the_rows_run_in_both_precisions(capsys):
    """One tiny row, timed in fp32 and bf16 autocast: both times and a small relative output gap."""
    amp_step.main(["--quick", "--only", "set_linear_mean"])
    out = capsys.readouterr().out
    assert out.startswith("CPU: ") and "fp32 and bf16 autocast" in out
    header, row = rows_of(out)
    got = dict(zip(header, row))
    assert float(got["fp32 ms"]) >= 0 and float(got["bf16 ms"]) >= 0
    assert 0 < float(got["output gap (rel.)"]) < 0.05  # bf16 moves the outputs a little, not nothing, not wholly


def test_only_and_rounds_are_checked_before_any_step():
    with pytest.raises(SystemExit):
        amp_step.main(["--quick", "--only", "set_transformer"])
    with pytest.raises(SystemExit):
        amp_step.main(["--quick", "--rounds", "0"])
