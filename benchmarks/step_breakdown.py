"""Where a train step's time goes, ours beside its public reference: attention kernels, matmuls, the rest (issue 40,
items 2 and 3). For the rows of benchmarks/family_step.py furthest from their reference or their FLOP bound.

family_step.py times the Set Transformers at 0.76-1.04x the public blocks and 5x their FLOP bound, Longformer at
3.4x. This script asks why, on the same rows (claims shapes, fp32, 1 thread, the same step and the same references):

  * **step ms**: the median of ``--rounds`` interleaved rounds (no profiler), as family_step.py times it;
  * **by kind**: one profiled step (``torch.profiler``, self CPU time per op, so nested ops are not counted twice),
    its time split into **attention** (the kernels of the attention weights: SDPA's CPU flash kernels, ``bmm``,
    ``baddbmm``, ``softmax`` and their backwards; not the loss's ``log_softmax``), **matmul** (``mm``, ``addmm``: the
    projections and feed-forwards), **optimizer** (Adam's update) and **other** (elementwise, LayerNorm, copies,
    the loss); each share of the profiled step is shown as ms of the timed step;
  * **scores**: attention-weight entries per forward pass (B x H x queries x keys, summed over the attention calls:
    counted on the ops that run, SDPA's q and k or ``softmax``'s input), and **ns / score**, the attention's time per
    entry (forward + backward): what the attention costs, whatever kernel computes it;
  * **at most**: the speed-up over the reference that ours would have if everything but its attention took no time
    (reference ms / ours' attention ms), the ceiling of what any change outside the attention kernel can give.

A second table times the attention kernel alone at each row's shapes, forward + backward: SDPA (the CPU flash
kernel, ours), the same call with no mask, and the explicit ``softmax(q k^T / sqrt(d)) v`` (the reference's way).

    PYTHONPATH=. python benchmarks/step_breakdown.py --rounds 3 --threads 1
    PYTHONPATH=. python benchmarks/step_breakdown.py --only set_transformer_isab --rounds 5
    PYTHONPATH=. python benchmarks/step_breakdown.py --quick
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
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from swarmlab.bench import timed

# benchmarks/ is a folder of scripts: family_step.py, loaded by its path, gives the rows, models, references and step
_spec = importlib.util.spec_from_file_location("benchmarks_family_step", Path(__file__).with_name("family_step.py"))
family_step = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(family_step, "ROWS"):
    _spec.loader.exec_module(family_step)

DEFAULT = ("set_transformer_isab", "set_transformer_sab", "longformer", "transformer")
KINDS = ("attention", "matmul", "optimizer", "other")
ATTENTION_OPS = ("scaled_dot_product", "flash_attention", "aten::bmm", "aten::baddbmm", "softmax")
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::matmul", "aten::linear")


def kind_of(op: str) -> str:
    """The kind of a profiler event's name (``aten::...``, or a ``record_function`` label)."""
    if "log_softmax" in op:  # the loss
        return "other"
    if any(k in op for k in ATTENTION_OPS):
        return "attention"
    if op in MATMUL_OPS:
        return "matmul"
    if op.startswith("Optimizer.") or "_foreach" in op or "adam" in op.lower():
        return "optimizer"
    return "other"


def profiled_kinds(step) -> dict[str, float]:
    """Each kind's share of one profiled call of ``step`` (self CPU time; shares sum to 1)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    total = {k: 0.0 for k in KINDS}
    for event in prof.key_averages():
        total[kind_of(event.key)] += event.self_cpu_time_total
    whole = sum(total.values()) or 1.0
    return {k: v / whole for k, v in total.items()}


class AttentionCounter(TorchDispatchMode):
    """Counts attention-weight entries as the ops run (SDPA's B*H*M*N from q and k, ``softmax``'s input elements),
    and keeps the distinct (B, H, M, N, Dh) of the SDPA calls."""

    def __init__(self):
        super().__init__()
        self.scores, self.shapes = 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__
        if name.startswith("_scaled_dot_product") and "backward" not in name:
            q, k = args[0], args[1]
            self.scores += q.numel() // q.shape[-1] * k.shape[-2]
            shape = (*q.shape[:3], k.shape[-2], q.shape[-1])
            if q.dim() == 4 and shape not in self.shapes:
                self.shapes.append(shape)
        elif name.startswith("_softmax") and "backward" not in name:
            self.scores += args[0].numel()
        return func(*args, **(kwargs or {}))


def count_attention(model, inputs) -> AttentionCounter:
    """One forward pass of ``model`` under an ``AttentionCounter``."""
    counter = AttentionCounter()
    with torch.no_grad(), counter:
        model(*inputs)
    return counter


def attention_kernels(shapes: list[tuple[int, int, int, int, int]], rounds: int) -> list[tuple]:
    """Forward + backward ms of one attention at each (B, H, M, N, Dh): SDPA with the all-True mask, without, and
    the explicit softmax; interleaved, medians."""
    cases = []
    for B, H, M, N, Dh in shapes:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(B, H, n, Dh, generator=g, requires_grad=True) for n in (M, N, N))
        grad, mask = torch.randn(B, H, M, Dh, generator=g), torch.ones(B, 1, 1, N, dtype=torch.bool)

        def sdpa(q=q, k=k, v=v, grad=grad, mask=mask):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask).backward(grad)

        def sdpa_nomask(q=q, k=k, v=v, grad=grad):
            F.scaled_dot_product_attention(q, k, v).backward(grad)

        def explicit(q=q, k=k, v=v, grad=grad, Dh=Dh):
            (torch.softmax(q @ k.transpose(-1, -2) * Dh**-0.5, dim=-1) @ v).backward(grad)

        cases.append(((B, H, M, N, Dh), (sdpa, sdpa_nomask, explicit)))
    times = {(i, j): [] for i, (_, fns) in enumerate(cases) for j in range(len(fns))}
    for _ in range(rounds + 1):  # the first round warms up
        for i, (_, fns) in enumerate(cases):
            for j, fn in enumerate(fns):
                times[i, j].append(timed(fn))
    return [(shape, [statistics.median(times[i, j][1:]) for j in range(3)]) for i, (shape, _) in enumerate(cases)]


def measure(rows, params, rounds: int) -> list[dict]:
    entries = []
    for row in rows:
        inputs, _ = family_step.row_batch(row)
        for side, model in zip(("ours", "ref"), family_step.build_pair(row)):
            if model is None:
                continue
            step = family_step.make_step(row, model, params)
            step()  # warm-up: Adam's state, the allocator
            entry = {"row": row, "side": side, "step": step, "times": []}
            entry["kinds"] = profiled_kinds(step)
            counter = count_attention(model, inputs)
            entry["scores"], entry["shapes"] = counter.scores, counter.shapes
            entries.append(entry)
    for _ in range(rounds):
        for entry in entries:
            entry["times"].append(timed(entry["step"]))
    return entries


def breakdown_table(entries: list[dict]) -> str:
    lines = [
        "| model | task | side | step ms | attention ms | matmul ms | optimizer ms | other ms | scores / fwd | "
        "ns / score | at most |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ref_ms = {(e["row"].task, e["row"].model): statistics.median(e["times"]) for e in entries if e["side"] == "ref"}
    for e in entries:
        row, ms = e["row"], statistics.median(e["times"]) * 1e3
        parts = {k: e["kinds"][k] * ms for k in KINDS}
        per_score = parts["attention"] * 1e6 / e["scores"] if e["scores"] else float("nan")
        ref = ref_ms.get((row.task, row.model))
        most = f"{ref * 1e3 / parts['attention']:.2f}x" if e["side"] == "ours" and ref and parts["attention"] else "-"
        name = family_step.REFERENCES[row.model][0] if e["side"] == "ref" else "ours"
        lines.append(
            f"| {row.model} | {row.task} | {name} | {ms:.0f} | "
            + " | ".join(f"{parts[k]:.0f} ({e['kinds'][k]:.0%})" for k in KINDS)
            + f" | {e['scores']:,} | {per_score:.1f} | {most} |"
        )
    return "\n".join(lines)


def kernel_table(entries: list[dict], rounds: int) -> str:
    shapes = list(dict.fromkeys(s for e in entries if e["side"] == "ours" for s in e["shapes"]))
    if not shapes:
        return "(no SDPA call in these rows)"
    lines = [
        "| B, H, M, N, Dh | SDPA, mask ms | SDPA, no mask ms | explicit softmax ms | ns / score (SDPA) |",
        "|---|---:|---:|---:|---:|",
    ]
    for (B, H, M, N, Dh), (masked, plain, explicit) in attention_kernels(shapes, rounds):
        lines.append(
            f"| {B}, {H}, {M}, {N}, {Dh} | {masked * 1e3:.2f} | {plain * 1e3:.2f} | {explicit * 1e3:.2f} | "
            f"{masked * 1e9 / (B * H * M * N):.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    family_step.row_arguments(ap)
    ap.set_defaults(only=",".join(DEFAULT), rounds=3)
    args = ap.parse_args(argv)
    params, rows, rounds = family_step.setup(args, family_step.only_models(ap, args.only))
    print(family_step.header("train step by kind of op, ours and the reference", args, rounds) + "\n", flush=True)
    t0 = time.perf_counter()
    entries = measure(rows, params, rounds)
    print(breakdown_table(entries))
    print("\nThe attention kernel alone at our rows' shapes (forward + backward, fp32):\n")
    print(kernel_table(entries, rounds))
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
