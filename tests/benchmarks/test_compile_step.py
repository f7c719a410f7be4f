"""benchmarks/compile_step.py: each model's train step eager against torch.compile on the CPU, its cold compile time
and break-even (issue 40, item 4). The compiled forward computes the eager one's function; the break-even is the
compile time over the step time saved, and "never" where the compiled step is not faster."""

import importlib.util
import sys

import pytest

from swarmlab.drive.params import load_params
from tests.conftest import REPO_ROOT

# benchmarks/ is a folder of scripts, not a package: load the script as a module
_spec = importlib.util.spec_from_file_location("benchmarks_compile_step", REPO_ROOT / "benchmarks" / "compile_step.py")
compile_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(compile_step)


def rows_of(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]


def test_break_even_is_compile_time_over_the_time_saved():
    from swarmlab.drive.run_config import train_config

    claims = load_params(profile="claims")
    rows = compile_step.family_step.resolve_rows(claims, {"lstm", "swarm"}, quick=True)
    res = {"gap": {}, "compile_s": {}, "times": {}}
    for i, (eager, fast) in enumerate([(0.100, 0.060), (0.100, 0.100), (0.050, 0.080)]):  # faster, equal, slower
        res["gap"][i], res["compile_s"][i] = 1e-7, 40.0
        res["times"][i, "eager"], res["times"][i, "compiled"] = [eager, 9.0, eager], [fast, 0.0, fast]  # medians
    header, *body = rows_of(compile_step.table(rows, res, claims))
    col = {name: header.index(name) for name in ("model", "speed-up", "break-even", "run budget")}
    assert [r[col["model"]] for r in body] == ["swarm", "lstm", "swarm"]  # the table's order: family_step's rows
    assert body[0][col["break-even"]] == "1,000 steps (1.7 min)"  # 40 s / (100 - 60) ms; 1,000 eager steps of 0.1 s
    assert body[0][col["speed-up"]] == "1.67x"
    assert body[1][col["break-even"]] == "never" and body[1][col["speed-up"]] == "1.00x"
    assert body[2][col["break-even"]] == "never"
    budget = train_config(claims, "clustering_direct", "swarm").time_budget_s
    assert budget > 0 and body[0][col["run budget"]] == f"{budget / 60:g} min net"  # a net-time budget, in minutes


def test_only_and_rounds_are_checked_before_any_compile():
    with pytest.raises(SystemExit):
        compile_step.main(["--quick", "--only", "set_transformer"])
    with pytest.raises(SystemExit):
        compile_step.main(["--quick", "--rounds", "0"])


@pytest.mark.slow
def test_the_compiled_step_computes_what_the_eager_one_does(capsys):
    """One small row, compiled cold with inductor (about 30 s): its eval-mode output matches eager's, and its row has a
    compile time, both step times and a break-even."""
    compile_step.main(["--quick", "--only", "set_linear_mean"])
    out = capsys.readouterr().out
    assert out.startswith("CPU: ") and "C++ compiler" in out
    header, row = rows_of(out)
    got = dict(zip(header, row))
    assert float(got["parity (max abs)"]) < 1e-5
    assert float(got["compile s"]) > 0 and float(got["eager ms"]) >= 0 and float(got["compiled ms"]) >= 0
    assert got["break-even"] == "never" or got["break-even"].endswith(" min)")
