"""``torch.compile`` on the CPU, per model: each decisive model's train step eager and compiled (inductor), the compile
time, and the steps after which compiling pays (issue 40, item 4).

Rows, shapes, inputs, optimizer and clipping are benchmarks/family_step.py's (the claims profile's models at their
tasks' claims shapes, fp32; ``--only``, ``--quick`` as there). Per row, two copies of our model from the same seed:
one eager, one through ``swarmlab.engine.device.compiled`` (what a run's ``train.compile`` setting does:
``torch.compile(model, mode, dynamic=False)``).

Columns:
  * **parity**: the largest absolute difference between a fresh pair's outputs in eval mode on the row's inputs
    (the compiled forward must compute the same function; dropout is off);
  * **compile s**: wall seconds of the compiled copy's first train step (tracing, inductor's codegen and the C++
    build of forward and backward, then the step), less one eager step; cold: dynamo reset before each row,
    inductor's graph and autograd caches off, its kernels built in a fresh folder;
  * **eager ms**, **compiled ms**: medians of ``--rounds`` interleaved rounds (row 1 eager, row 1 compiled, row 2
    eager, ...) after one warm-up step each;
  * **speed-up** = eager ms / compiled ms;
  * **break-even**: the steps after which the compiled run has caught up with the eager one, compile s / (eager -
    compiled), and those steps' eager minutes; ``never`` where the compiled step is not faster;
  * **run budget**: the profile's per-run budget for that task and model (``time_budget_s``, else ``max_steps``,
    else ``max_epochs``), as ``swarmlab.drive.run_config.train_config`` resolves it: compiling pays in a run when the
    break-even comes well inside it.

    PYTHONPATH=. python benchmarks/compile_step.py --rounds 3 --threads 1      # every row: tens of minutes of compiling
    PYTHONPATH=. python benchmarks/compile_step.py --only swarm,lstm --rounds 5
    PYTHONPATH=. python benchmarks/compile_step.py --quick --only set_linear_mean   # tiny shapes: a smoke test

Compiling needs a C++ compiler (inductor builds its CPU kernels with it); the header names the one found.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from swarmlab.bench import timed
from swarmlab.drive.run_config import train_config
from swarmlab.engine.device import compiled

# benchmarks/ is a folder of scripts: family_step.py, loaded by its path, gives the rows, models and steps
_spec = importlib.util.spec_from_file_location("benchmarks_family_step", Path(__file__).with_name("family_step.py"))
family_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(family_step, "ROWS"):
    _spec.loader.exec_module(family_step)

MODES = ("default", "max-autotune-no-cudagraphs")  # inductor's CPU modes (reduce-overhead is CUDA graphs)


def build(row, mode: str):
    """(eager model, compiled model), both our model from seed 0."""
    return family_step.build_ours(row), compiled(family_step.build_ours(row), mode)


def output_gap(row, mode: str) -> float:
    """Max |eager - compiled| of a fresh pair's eval-mode outputs on the row's inputs (the image model's: pixels and
    labels, as the step feeds it)."""
    eager, fast = build(row, mode)
    inputs, _ = family_step.row_batch(row)
    eager.eval(), fast.eval()
    with torch.no_grad():
        a, b = eager(*inputs), fast(*inputs)
    return (a.float() - b.float()).abs().max().item()


def budget_text(params: dict, row) -> str:
    tc = train_config(params, row.task, row.model)
    if tc.time_budget_s:
        return f"{tc.time_budget_s / 60:g} min net"
    if tc.max_steps:
        return f"{tc.max_steps:,} steps"
    return f"{tc.max_epochs} epochs"


def measure(rows: list, params: dict, rounds: int, mode: str) -> dict:
    """Compile times first, each from nothing (dynamo reset; inductor's caches off, in a fresh cache folder), then
    the interleaved rounds, then parity on fresh pairs (after the timing: its eval-mode compile cannot warm it)."""
    res = {"gap": {}, "compile_s": {}, "times": {}}
    entries = []
    for i, row in enumerate(rows):
        print(f"compiling {row.model} ({row.task}) ...", file=sys.stderr, flush=True)
        torch._dynamo.reset()
        eager, fast = build(row, mode)
        eager_step, fast_step = (family_step.make_step(row, m, params) for m in (eager, fast))
        eager_step()  # warm-up
        first = timed(fast_step)
        res["compile_s"][i] = max(first - timed(eager_step), 0.0)
        fast_step()  # warm-up after the compile
        entries += [((i, "eager"), eager_step), ((i, "compiled"), fast_step)]
        res["times"][i, "eager"], res["times"][i, "compiled"] = [], []
    for _ in range(rounds):
        for key, step in entries:
            res["times"][key].append(timed(step))
    for i, row in enumerate(rows):
        res["gap"][i] = output_gap(row, mode)
    return res


def table(rows: list, res: dict, params: dict) -> str:
    lines = [
        "| model | task | shape | parity (max abs) | compile s | eager ms | compiled ms | speed-up | break-even | "
        "run budget |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for i, row in enumerate(rows):
        e, c = (statistics.median(res["times"][i, k]) for k in ("eager", "compiled"))
        comp = res["compile_s"][i]
        if c < e:
            steps = comp / (e - c)
            even = f"{steps:,.0f} steps ({steps * e / 60:.1f} min)"
        else:
            even = "never"
        lines.append(
            f"| {row.model} | {row.task} | {family_step.shape_text(row)} | {res['gap'][i]:.1e} | {comp:.0f} | "
            f"{e * 1e3:.0f} | {c * 1e3:.0f} | {e / c:.2f}x | {even} | {budget_text(params, row)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    family_step.row_arguments(ap)
    ap.add_argument("--mode", default="default", choices=MODES, help="torch.compile mode (default: default)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if compiler is None:
        ap.error("no C++ compiler (g++ or $CXX): inductor builds its CPU kernels with one")
    params, rows, rounds = family_step.setup(args, family_step.only_models(ap, args.only))
    # cold compiles, as a run's first: no graph or autograd cache, kernels built in a folder of this run's own
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    cache = tempfile.TemporaryDirectory(prefix="compile-step-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache.name
    title = f"train step eager vs torch.compile (mode {args.mode})"
    print(family_step.header(title, args, rounds, f"C++ compiler {compiler}, ") + "\n", flush=True)
    t0 = time.perf_counter()
    print(table(rows, measure(rows, params, rounds, args.mode), params))
    print(f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")
    cache.cleanup()


if __name__ == "__main__":
    main()
