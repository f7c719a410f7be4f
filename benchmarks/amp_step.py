"""bf16 autocast on the CPU, per model: each decisive model's train step in fp32 and with its forward in bf16 autocast,
timed interleaved in one process run, beside the precision the profile's ``amp`` setting gives that model here (issue
40: a run with a time budget makes fewer steps when its precision slows its step).

Rows, shapes, inputs, optimizer and clipping are benchmarks/family_step.py's (the claims profile's models at their
tasks' claims shapes; ``--only``, ``--quick`` as there). Per row, two copies of our model from the same seed, each
with its own optimizer: one stepped in fp32, one with its forward under ``torch.autocast("cpu", torch.bfloat16)`` (the
engine's ``amp``; the loss is taken in fp32 in both, as the engine does).

Columns:
  * **fp32 ms**, **bf16 ms**: medians of ``--rounds`` interleaved rounds (row 1 fp32, row 1 bf16, row 2 fp32, ...)
    after one warm-up step each;
  * **bf16 speed-up** = fp32 ms / bf16 ms (> 1: autocast makes the step faster);
  * **output gap**: the largest absolute difference between a fresh pair's eval-mode outputs (fp32 against bf16
    autocast) on the row's inputs, over the largest fp32 output: how far bf16 moves what the model computes;
  * **profile amp**: the task's ``train.amp`` in the profile and what it resolves to on this CPU (``auto`` is bf16
    where the CPU computes bf16 natively: ``swarmlab.engine.resolve_amp``);
  * **run budget**: the profile's per-run budget (a time budget turns a slower step into fewer steps).

    PYTHONPATH=. python benchmarks/amp_step.py --rounds 5 --threads 1     # every row, a few minutes on one core
    PYTHONPATH=. python benchmarks/amp_step.py --only swarm_transformer_small,swarm --rounds 9
    PYTHONPATH=. python benchmarks/amp_step.py --quick                    # tiny shapes, one round: a smoke test

On a CPU without native bf16 (no ``avx512_bf16`` or AMX), autocast runs bf16 in emulation; the header's CPU line says
which this is.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from swarmlab.bench import timed
from swarmlab.drive.run_config import train_config
from swarmlab.engine import resolve_amp

# benchmarks/ is a folder of scripts: family_step.py and compile_step.py, loaded by their paths, give the rows, models,
# steps and budgets
_spec = importlib.util.spec_from_file_location("benchmarks_compile_step", Path(__file__).with_name("compile_step.py"))
compile_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(compile_step, "MODES"):
    _spec.loader.exec_module(compile_step)
family_step = compile_step.family_step


def output_gap(row) -> float:
    """Max |fp32 - bf16 autocast| of a fresh model's eval-mode outputs on the row's inputs, over max |fp32|."""
    model = family_step.build_ours(row).eval()
    inputs, _ = family_step.row_batch(row)
    with torch.no_grad():
        a = model(*inputs).float()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b = model(*inputs).float()
    return ((a - b).abs().max() / a.abs().max().clamp_min(1e-12)).item()


def measure(rows: list, params: dict, rounds: int) -> dict:
    res = {"gap": {}, "times": {}}
    entries = []
    for i, row in enumerate(rows):
        for side, amp in (("fp32", False), ("bf16", True)):
            step = family_step.make_step(row, family_step.build_ours(row), params, amp=amp)
            step()  # warm-up: Adam state, allocator, autocast's weight casts
            entries.append(((i, side), step))
            res["times"][i, side] = []
    for _ in range(rounds):
        for key, step in entries:
            res["times"][key].append(timed(step))
    for i, row in enumerate(rows):
        res["gap"][i] = output_gap(row)
    return res


def amp_text(params: dict, row) -> str:
    setting = train_config(params, row.task, row.model).amp
    resolved = "bf16" if resolve_amp(setting, torch.device("cpu")) else "fp32"
    return f"{setting} = {resolved}" if setting == "auto" else str(setting)


def table(rows: list, res: dict, params: dict) -> str:
    lines = [
        "| model | task | shape | fp32 ms | bf16 ms | bf16 speed-up | output gap (rel.) | profile amp | run budget |",
        "|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for i, row in enumerate(rows):
        f, b = (statistics.median(res["times"][i, k]) for k in ("fp32", "bf16"))
        lines.append(
            f"| {row.model} | {row.task} | {family_step.shape_text(row)} | {f * 1e3:.0f} | {b * 1e3:.0f} | "
            f"{f / b:.2f}x | {res['gap'][i]:.1e} | {amp_text(params, row)} | {compile_step.budget_text(params, row)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    family_step.row_arguments(ap)
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    params, rows, rounds = family_step.setup(args, family_step.only_models(ap, args.only))
    title = "train step fp32 vs bf16 autocast"
    print(family_step.header(title, args, rounds, precision="fp32 and bf16 autocast") + "\n", flush=True)
    t0 = time.perf_counter()
    print(table(rows, measure(rows, params, rounds), params))
    print(f"load average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
