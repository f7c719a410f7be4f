"""Stage `memory_scaling`: peak memory and time of one inference forward pass versus sequence length N (paper 000,
Figure 3).

For every model spec and every N in ``memory_scaling.tokens`` (params.yaml, profile-aware), one forward in a fresh
subprocess; what is measured and how is documented in ``swarmlab/drive/memory_scaling.py``. Writes
``results.json`` (every point), ``metrics.json`` (exponents and goals), ``table.md`` and ``memory_scaling.png`` to
``reports/memory_scaling/`` (or ``--out``).

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


@cli
def main(argv: list[str] | None = None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", default=None, help='model specs, e.g. transformer "swarmformer_small cluster_size=8"'
    )
    parser.add_argument("--tokens", nargs="+", type=int, default=None, help="sequence lengths N")
    parser.add_argument("--timeout-s", type=float, default=None, help="per-point time limit")
    parser.add_argument("--mem-cap-gb", type=float, default=None, help="do not run points predicted above this")
    parser.add_argument("--device", default=None, help="cpu, cuda or auto")
    parser.add_argument("--out", default=None, help=f"output folder (default: {OUT_DIR.relative_to(REPO_ROOT)})")
    args = parser.parse_args(argv)
    cfg = resolve_config(params_from(args), args)
    result = run_benchmark(cfg)
    out_dir = Path(args.out).resolve() if args.out else OUT_DIR
    write_outputs(result, out_dir)
    print()
    print(markdown_table(result))
    print(goals_text(result["goals"]))
    print(f"wrote {out_dir}/results.json, metrics.json, table.md, memory_scaling.png")


if __name__ == "__main__":
    main()
