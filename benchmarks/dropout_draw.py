"""The house dropout's draw against ``nn.Dropout``'s, per model, in one train step (issue 40, items 3 and 5).

models/layers/drop.py's ``Dropout`` keeps ``nn.Dropout``'s law (keep with probability 1 - p, scale by 1/(1 - p)) and
draws the mask as ``rand >= p`` instead of ``bernoulli_``, which took 15% of Longformer's train step at 1,024 tokens
in a profile with the other core busy (8.6% for the house draw on an idle machine, benchmarks/README.md). For each row of benchmarks/family_step.py whose model has dropout (claims
shapes, fp32, the same step and optimizer), two copies of our model from the same seed are timed interleaved: as
built (the house draw), and with every house ``Dropout`` module swapped for an ``nn.Dropout`` of the same p (the
draw before). ``speed-up`` = before ms / house ms. Rows whose model drops nothing at these settings (p = 0
everywhere, or SwarmFormer, whose fast path drew through ``fast_dropout`` already) are named, not timed.

    PYTHONPATH=. python benchmarks/dropout_draw.py --rounds 5
    PYTHONPATH=. python benchmarks/dropout_draw.py --only longformer,transformer --rounds 3
    PYTHONPATH=. python benchmarks/dropout_draw.py --quick
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch.nn as nn

from models.layers.drop import Dropout
from swarmlab.bench import timed

# benchmarks/ is a folder of scripts: family_step.py, loaded by its path, gives the rows, models and step
_spec = importlib.util.spec_from_file_location("benchmarks_family_step", Path(__file__).with_name("family_step.py"))
family_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(family_step, "ROWS"):
    _spec.loader.exec_module(family_step)


def with_nn_dropout(model: nn.Module) -> int:
    """Swap every house ``Dropout`` of ``model`` for ``nn.Dropout`` of the same p, in place; returns how many."""
    swaps = [(name, m) for name, m in model.named_modules() if isinstance(m, Dropout)]
    for name, m in swaps:
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, nn.Dropout(m.p))
    return len(swaps)


def active(model: nn.Module) -> int:
    """How many house dropout modules of ``model`` drop something (p > 0)."""
    return sum(isinstance(m, Dropout) and m.p > 0 for m in model.modules())


def measure(rows, params, rounds: int) -> tuple[list[dict], list[str]]:
    """The timed rows, and the rows with no house dropout to swap."""
    entries, idle = [], []
    for row in rows:
        house, before = family_step.build_ours(row), family_step.build_ours(row)
        if not active(house):
            idle.append(f"{row.model} ({row.task})")
            continue
        entry = {"row": row, "active": active(house), "swapped": with_nn_dropout(before), "times": {}}
        entry["steps"] = {
            "house": family_step.make_step(row, house, params),
            "before": family_step.make_step(row, before, params),
        }
        for side, step in entry["steps"].items():
            step()  # warm-up: Adam's state, the allocator
            entry["times"][side] = []
        entries.append(entry)
    for _ in range(rounds):
        for entry in entries:
            for side, step in entry["steps"].items():
                entry["times"][side].append(timed(step))
    return entries, idle


def table(entries: list[dict]) -> str:
    lines = [
        "| model | task | shape | dropout modules (p > 0) | nn.Dropout ms | house ms | speed-up |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for e in entries:
        row = e["row"]
        before, house = (statistics.median(e["times"][k]) for k in ("before", "house"))
        lines.append(
            f"| {row.model} | {row.task} | {family_step.shape_text(row)} | {e['swapped']} ({e['active']}) | "
            f"{before * 1e3:.0f} | {house * 1e3:.0f} | {before / house:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    family_step.row_arguments(ap)
    args = ap.parse_args(argv)
    params, rows, rounds = family_step.setup(args, family_step.only_models(ap, args.only))
    print(family_step.header("train step, nn.Dropout's draw vs the house Dropout's", args, rounds) + "\n", flush=True)
    t0 = time.perf_counter()
    entries, idle = measure(rows, params, rounds)
    print(table(entries))
    print(f"\nno house dropout with p > 0, not timed: {', '.join(idle) or 'none'}")
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
