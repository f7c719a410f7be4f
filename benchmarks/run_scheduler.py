"""Wall time of one train stage whose runs go one after another in-process, or over a local Ray 1 or 2 at a time.

One task (``toy_counting``, generated data: no data stage needed) with 2 models x 2 seeds = 4 step-bounded runs,
each configuration a fresh ``python -m pipelines.train`` process (the wall time a user waits, Python start and imports
included) in its own scratch work folder, without MLflow:

    A  in-process, 1 run at a time, 1 torch thread     (schedule.parallel 1, train.num_threads 1)
    B  in-process, 1 run at a time, 2 torch threads    (parallel 1, num_threads 2: the whole 2-core machine per run)
    C  local Ray,  1 run at a time, 1 torch thread     (parallel 0 with 2 CPUs per run on 2 cores: one at a time)
    D  local Ray,  2 runs at a time, 1 thread each     (parallel 2, 1 CPU per run: the cpu profile's setting)

Ray's overhead per run is (C - A) / runs: starting a local Ray, a worker per run slot (Python + torch imports in it),
shipping each run's arguments and results. Also printed: the mean net training seconds of a run (the engine's
``train_time_s``, no start-up in it), so a slower wall time can be told apart from slower steps.

    python benchmarks/run_scheduler.py [--steps 100] [--d-model 64] [--repeats 1] [--configs ABCD]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from swarmlab.paths import REPO_ROOT
from swarmlab.machine import describe_machine

CONFIGS = [  # (label, schedule, train.num_threads)
    ("A in-process, 1 at a time, 1 thread", {"parallel": 1}, 1),
    ("B in-process, 1 at a time, 2 threads", {"parallel": 1}, 2),
    ("C local Ray, 1 at a time, 1 thread", {"parallel": 0, "cpus_per_run": 2}, 1),
    ("D local Ray, 2 at a time, 1 thread each", {"parallel": 2, "cpus_per_run": 1}, 1),
]


def write_params(folder: Path, *, schedule: dict, threads: int, steps: int, d_model: int) -> Path:
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    section = raw["defaults"]["tasks"]["toy_counting"]
    section.update(
        models=["transformer", "linear_transformer"],
        seeds=[0, 1],
        model_overrides={"d_model": d_model, "num_layers": 2, "num_heads": 2},
    )
    section["train"].update(max_steps=steps, eval_every=max(1, steps // 3), batch_size=32)
    section["options"].update(seq_len=64)
    raw["profile"] = "bench"
    raw["profiles"] = {"bench": {"train": {"device": "cpu", "num_threads": threads}}}
    raw.pop("train", None)
    raw["schedule"] = schedule
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def run_stage(params: Path, workdir: Path) -> tuple[float, dict]:
    env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(workdir),
        "SWARMLAB_PROGRESS": "0",
        "OMP_NUM_THREADS": "1",
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAY_ADDRESS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.train", "--params", str(params), "--task", "toy_counting", "--no-tracking"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"error: the stage failed:\n{proc.stderr[-3000:]}")
    metrics = json.loads((workdir / "reports" / "train" / "toy_counting" / "metrics.json").read_text())
    return wall, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run")
    parser.add_argument("--d-model", type=int, default=64, help="width of both models")
    parser.add_argument("--repeats", type=int, default=1, help="times each configuration runs (the median is shown)")
    parser.add_argument("--configs", default="ABCD", help="which configurations to run (A and C give Ray's overhead)")
    args = parser.parse_args()
    if not set(args.configs) <= set("ABCD") or not args.configs:
        sys.exit(f"error: --configs takes letters of ABCD, got {args.configs!r}")
    print(describe_machine())
    print(f"{os.cpu_count()} CPU(s) seen; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"toy_counting: transformer and linear_transformer (d_model {args.d_model}, 2 layers, 64 tokens, batch 32) "
        f"x seeds 0, 1 = 4 runs of {args.steps} steps; each configuration a fresh `python -m pipelines.train`\n"
    )
    rows, results = [], {}
    scratch = Path(tempfile.mkdtemp(prefix="run_scheduler-"))
    try:
        for label, schedule, threads in [c for c in CONFIGS if c[0][0] in args.configs]:
            walls, nets = [], []
            for r in range(args.repeats):
                folder = scratch / f"{label[0]}{r}"
                folder.mkdir()
                wall, metrics = run_stage(
                    write_params(folder, schedule=schedule, threads=threads, steps=args.steps, d_model=args.d_model),
                    folder / "work",
                )
                walls.append(wall)
                nets.append(statistics.mean(m["train_time_s"] for m in metrics.values()))
                results[label] = {
                    k: {
                        kk: vv for kk, vv in v.items() if kk not in ("train_time_s", "train_samples_per_s", "resources")
                    }
                    for k, v in metrics.items()
                }
                shutil.rmtree(folder)
            rows.append((label, statistics.median(walls), statistics.median(nets)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = rows[0][1]
    print(f"| configuration | wall s | vs {rows[0][0][0]} | mean net train s per run |")
    print("|---|---|---|---|")
    for label, wall, net in rows:
        print(f"| {label} | {wall:.1f} | {base / wall:.2f}x | {net:.1f} |")
    walls = {label[0]: wall for label, wall, _ in rows}
    if {"A", "C"} <= set(walls):
        print(
            f"\nRay's overhead per run (C - A) / 4: {(walls['C'] - walls['A']) / 4:+.1f} s "
            f"(a local Ray's start and stop, a worker per slot with its imports, arguments and results)"
        )
    one_thread = [r for label, r in results.items() if label[0] in "ACD"]
    print(
        f"1-thread results ({', '.join(l[0] for l in results if l[0] in 'ACD')}) identical: "
        f"{all(r == one_thread[0] for r in one_thread)}"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
