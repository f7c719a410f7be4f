"""Set models' train step against its FLOP bound on this CPU (issue 19): step ms, FLOPs, bound, ratio, per thread count.

For every model of ``tasks.clustering_direct.models`` (params.yaml), at batch ``train.batch_size`` (50) and the set
sizes N of the task (default: the mean of the profile's n range, 100 for ``cpu`` (n 50..150), and of the paper's,
550 (n 100..1000); training batches hold one N each, so nothing is padded, but the all-True mask is passed as the
engine does), one process measures:

  * **ceiling**: the best of several 1024^3 fp32 matmuls (GFLOP/s), and the same for SWARM's own matmul shape
    (1024 x 192) x (192 x 768), timed in the same interleaved rounds as the models;
  * **FLOPs per train step** (forward + backward; Adam's update is a few elementwise passes over the parameters and
    is not counted): ``torch.utils.flop_counter.FlopCounterMode`` over one real step, with the formulas it lacks
    registered here (in-place ``addmm_`` / ``baddbmm_``, which the fused SWARM recurrence uses; the CPU flash
    attention kernels of SDPA; oneDNN's LSTM layer), so every model is counted on the ops that actually run;
  * **bound** = FLOPs / ceiling, the ceiling being the faster of the two matmuls (on a shared machine the longer
    square one is the likelier to be interrupted): the time the step would take if it did only its FLOPs at the
    measured fp32 matmul peak;
  * **step**: forward, cross-entropy of per-entity logits against random labels, zero_grad, backward, Adam step;
    median (and best) of ``--rounds`` rounds after one warm-up, models interleaved (model 1, model 2, ..., model 1,
    ...) so that a noisy, shared machine slows all alike. ratio = step / bound (1 = at the matmul peak).
    **CPU ms** is the process's CPU time for the step (``time.process_time``): with one thread, the step's time
    without the stretches the process sat descheduled behind other jobs, the steadier measure on a shared
    machine (co-runners still share caches and memory bandwidth); with two threads it adds both threads' time.

Rows ``swarm block_rows=0`` are the fast path before issue 19 (all sets at once), ``swarm`` the one after (blocks of
whole sets, ``SwarmConfig.block_rows``; with one intra-op thread only, so at 2 threads both rows time the same
path); ``--with-plain`` adds ``swarm fast=False`` (plain autograd).

    python benchmarks/set_step_bound.py                          # ~5 min on 2 idle cores: N 100 and 550, 1 and 2 threads
    python benchmarks/set_step_bound.py --entities 100 --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from models import create_model
from swarmlab.bench import count_flops, matmul_probe, timed_cpu, train_step
from swarmlab.machine import describe_cpu
from swarmlab.drive.params import PARAMS_FILE, load_params, read_yaml

TASK = "clustering_direct"
CEILING_N = 1024  # square fp32 matmul for the ceiling
SWARM_SHAPE = (1024, 192, 768)  # (rows, H, 4H): one block of SWARM(192-10-1)'s recurrence matmul


# ---- timing ------------------------------------------------------------------------------------------------


def rows_for(task: dict, with_plain: bool) -> list[tuple[str, dict]]:
    """(label, overrides) per timed model: the task's models, swarm twice (before / after issue 19)."""
    rows = []
    for name in task["models"]:
        overrides = dict(task.get("model_overrides", {}).get(name, {}) or {})
        if name == "swarm":
            rows.append(("swarm block_rows=0", {**overrides, "block_rows": 0}))
        rows.append((name, overrides))
        if name == "swarm" and with_plain:
            rows.append(("swarm fast=False", {**overrides, "fast": False}))
    return rows


def measure(task: dict, rows, B: int, N: int, threads: int, rounds: int) -> dict:
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, N, 2, generator=g)  # (B, N, 2) points
    mask = torch.ones(B, N, dtype=torch.bool)  # one N per training batch: all real, passed as the engine does
    labels = torch.randint(0, 10, (B, N), generator=g)
    steps, flops, params = {}, {}, {}
    for label, overrides in rows:
        name = label.split()[0]
        torch.manual_seed(0)
        model = create_model(name, dim_input=2, dim_output=10, **overrides)
        steps[label] = train_step(model, (x, mask), labels, torch.optim.Adam(model.parameters(), lr=1e-3))
        flops[label] = count_flops(steps[label])  # also the warm-up (Adam state, allocator)
        params[label] = sum(p.numel() for p in model.parameters())
    ceilings = {"square": matmul_probe(CEILING_N, CEILING_N, CEILING_N), "swarm": matmul_probe(*SWARM_SHAPE)}
    times = {label: [] for label in steps}
    cpu = {label: [] for label in steps}
    peak = {key: 0.0 for key in ceilings}
    for _ in range(rounds):
        for key, probe in ceilings.items():
            peak[key] = max(peak[key], probe())
        for label, step in steps.items():
            wall, cpu_s = timed_cpu(step)
            times[label].append(wall)
            cpu[label].append(cpu_s)
    return {"times": times, "cpu": cpu, "flops": flops, "params": params, "ceiling_gflops": peak}


def table(res: dict, B: int, N: int, threads: int) -> str:
    ceiling = max(res["ceiling_gflops"].values())
    lines = [
        f"\n### N={N}, B={B}, {threads} thread(s): ceiling {ceiling:.1f} GFLOP/s (best fp32 matmul: 1024^3 "
        f"{res['ceiling_gflops']['square']:.1f}, SWARM's (1024x192)x(192x768) {res['ceiling_gflops']['swarm']:.1f})\n",
        "| model | params | GFLOP/step | bound ms | step ms (median) | best ms | ratio step/bound | samples/s | "
        "GFLOP/s | vs before | CPU ms (median) | ratio CPU/bound | vs before (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, ts in res["times"].items():
        med, best = statistics.median(ts), min(ts)
        flops = res["flops"][label]
        bound = flops / (ceiling * 1e9)
        cpu = statistics.median(res["cpu"][label])
        before = before_cpu = ""
        if label == "swarm" and "swarm block_rows=0" in res["times"]:
            before = f"{statistics.median(res['times']['swarm block_rows=0']) / med:.2f}x"
            before_cpu = f"{statistics.median(res['cpu']['swarm block_rows=0']) / cpu:.2f}x"
        lines.append(
            f"| {label} | {res['params'][label]:,} | {flops / 1e9:.2f} | {bound * 1e3:.1f} | {med * 1e3:.0f} | "
            f"{best * 1e3:.0f} | {med / bound:.1f} | {B / med:.1f} | {flops / med / 1e9:.1f} | {before} | "
            f"{cpu * 1e3:.0f} | {cpu / bound:.1f} | {before_cpu} |"
        )
    return "\n".join(lines)


def default_entities(profile: str | None) -> list[int]:
    """Mean set size of the profile's n range and of the paper's (params.yaml defaults)."""
    sizes = []
    for options in (
        load_params(profile=profile)["tasks"][TASK]["options"],
        read_yaml(PARAMS_FILE)["defaults"]["tasks"][TASK]["options"],
    ):
        n = (options["n_min"] + options["n_max"]) // 2
        if n not in sizes:
            sizes.append(n)
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu", help="params.yaml profile for the models and set sizes (default cpu)")
    ap.add_argument(
        "--entities",
        type=int,
        nargs="+",
        default=None,
        help="set sizes N (default: the mean of the profile's n range and of the paper's)",
    )
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op threads (default 1 2)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds after the counted warm-up step")
    ap.add_argument("--models", nargs="+", default=None, help="only these of the task's models")
    ap.add_argument("--with-plain", action="store_true", help="add swarm's plain autograd path (fast=False)")
    args = ap.parse_args()
    task = load_params(profile=args.profile)["tasks"][TASK]
    if args.models:
        unknown = sorted(set(args.models) - set(task["models"]))
        if unknown:
            sys.exit(f"set_step_bound: {unknown} are not models of tasks.{TASK} ({', '.join(task['models'])})")
        task = {**task, "models": [m for m in task["models"] if m in args.models]}
    B = task["train"]["batch_size"]
    entities = args.entities or default_entities(args.profile)
    rows = rows_for(task, args.with_plain)
    t_start = time.perf_counter()
    print(
        f"# set models' train step vs FLOP bound, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"torch {torch.__version__}, load average at start {os.getloadavg()[0]:.1f}"
    )
    print(f"CPU: {describe_cpu()}; capability {torch.backends.cpu.get_cpu_capability()}; {os.cpu_count()} cores")
    print(
        f"task {TASK} (profile {args.profile}): B={B}, N in {entities}, threads {args.threads}, "
        f"{args.rounds} rounds after 1 warm-up"
    )
    for N in entities:
        for threads in args.threads:
            print(table(measure(task, rows, B, N, threads, args.rounds), B, N, threads), flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
