"""Stage `memory_scaling`: peak memory and time of one inference forward pass versus sequence length N (paper 000,
Figure 3).

For every model spec and every N in ``memory_scaling.tokens`` (params.yaml, profile-aware), one forward in a fresh
subprocess; what is measured and how is documented in ``swarmlab/drive/memory_scaling.py``. Writes
``results.json`` (every point), ``metrics.json`` (exponents and goals), ``table.md`` and ``memory_scaling.png`` to
``reports/memory_scaling/`` (or ``--out``), then logs one MLflow run (experiment ``memory_scaling``, named
``memory_scaling | <profile>``): each model's peak-memory increment (MB) and time (ms) per point with N as the step,
so MLflow's charts draw the curves; the exponents as metrics; the four files as artifacts (``--no-tracking``: none).

    python -m pipelines.memory_scaling                       # the active profile (params.yaml)
    python -m pipelines.memory_scaling --profile smoke
    python -m pipelines.memory_scaling --models transformer "swarmformer_small cluster_size=8" --tokens 1024 4096

A model spec is a registry name followed by ``key=value`` overrides (values parsed as YAML).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from swarmlab.drive.stage_cli import params_from, stage_parser
from swarmlab.drive.memory_scaling import goals_text, markdown_table, run_benchmark, write_outputs
from swarmlab.paths import REPO_ROOT, REPORTS_DIR
from swarmlab.errors import cli
from swarmlab.tracking import MlflowTracker, check_tracking_uri

OUT_DIR = REPORTS_DIR / "memory_scaling"


def resolve_config(params: dict, args: argparse.Namespace) -> dict:
    """The ``memory_scaling`` params with the command line's overrides on top."""
    cfg = dict(params["memory_scaling"])
    for key, value in (
        ("models", args.models),
        ("tokens", args.tokens),
        ("timeout_s", args.timeout_s),
        ("mem_cap_gb", args.mem_cap_gb),
        ("device", args.device),
    ):
        if value is not None:
            cfg[key] = value
    return cfg


def metric_key(spec: str) -> str:
    """A model spec as part of an MLflow metric key (letters, digits, ``_ - . /`` and spaces only)."""
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in spec)


def log_run(result: dict, out_dir: Path, profile: str) -> str | None:
    """The benchmark as one MLflow run; returns its id (None when the store failed meanwhile: a warning)."""
    tracker = MlflowTracker(
        "memory_scaling", f"memory_scaling | {profile}", tags={"stage": "memory_scaling", "profile": profile}
    )
    config = result["config"]
    tracker.log_params({"memory_scaling": {k: config[k] for k in ("models", "tokens", "device") if k in config}})
    for point in result["points"]:
        if point.get("status") != "ok":
            continue
        key = metric_key(point["model"])
        numbers = {f"increment_mb/{key}": point["increment_bytes"] / 2**20, f"time_ms/{key}": 1000 * point["time_s"]}
        tracker.log_metrics(numbers, step=int(point["tokens"]))
    tracker.log_metrics({f"{k}/{metric_key(m)}": v for m, fit in result["fits"].items() for k, v in fit.items()})
    for name in ("results.json", "metrics.json", "table.md", "memory_scaling.png"):
        tracker.log_artifact(Path(out_dir) / name)
    tracker.finish()
    return tracker.run_id if not tracker.lost else None


@cli
def main(argv: list[str] | None = None) -> None:
    parser = stage_parser(__doc__)
    parser.add_argument(
        "--models", nargs="+", default=None, help='model specs, e.g. transformer "swarmformer_small cluster_size=8"'
    )
    parser.add_argument("--tokens", nargs="+", type=int, default=None, help="sequence lengths N")
    parser.add_argument("--timeout-s", type=float, default=None, help="per-point time limit")
    parser.add_argument("--mem-cap-gb", type=float, default=None, help="do not run points predicted above this")
    parser.add_argument("--device", default=None, help="cpu, cuda or auto")
    parser.add_argument("--out", default=None, help=f"output folder (default: {OUT_DIR.relative_to(REPO_ROOT)})")
    parser.add_argument("--no-tracking", action="store_true", help="do not log the benchmark to MLflow")
    args = parser.parse_args(argv)
    params = params_from(args)
    cfg = resolve_config(params, args)
    if not args.no_tracking:
        check_tracking_uri()
    result = run_benchmark(cfg)
    out_dir = Path(args.out).resolve() if args.out else OUT_DIR
    write_outputs(result, out_dir)
    if not args.no_tracking:
        log_run(result, out_dir, params.get("profile") or "")
    print()
    print(markdown_table(result))
    print(goals_text(result["goals"]))
    print(f"wrote {out_dir}/results.json, metrics.json, table.md, memory_scaling.png")


if __name__ == "__main__":
    main()
