"""Stage `frontier@<task>`: the validation score against the parameter count per model family, each family's
frontier dashed, as paper 003 Figure 2.

Points: every model of ``reports/train/<task>/metrics.json`` (the train stage) and, when a sweep of the task
has run, every finished trial of ``reports/sweep/<task>/summary.csv`` (its best validation score; the parameter
count from the ``num_params`` column, or from the model rebuilt with the trial's params). A point is on its
family's frontier when no model of the family with at most as many parameters scores better. The bar at the right
end of a frontier marks the largest model of the family that was tried. Codes beside the points follow paper 003
Table 1 (hidden units - inducing points - iterations - layers, the fields a model has).

Writes ``reports/frontier/<task>/frontier.png``, ``frontier.md`` (the best model per family) and
``frontier.json`` (every point). A sweep's results are read when present but are not a DVC dependency (sweeps
run outside the default pipeline): after a sweep, ``dvc repro --force frontier@<task>``.

    python -m pipelines.frontier [--task T] [--profile P]
"""

from __future__ import annotations

import json
from pathlib import Path

from swarmlab.errors import cli
from swarmlab.drive.frontier import best_per_family, collect_points, frontier_flags
from swarmlab.io import atomic_write_text
from swarmlab.paths import REPORTS_DIR
from swarmlab.plots import frontier_plot
from swarmlab.drive.runs import check_stage_serves, default_task, make_task, report_dir
from swarmlab.drive.stage_cli import add_task_argument, params_from, stage_parser

# paper 003 Figure 2: the families of set models; a task of another kind (models.list_models(kind=...)) has no frontier
SERVES_KIND = "set"


def frontier(params: dict, task_name: str | None = None, *, report_root: Path = REPORTS_DIR) -> dict:
    """Collect the points of a task, mark each family's frontier, write the plot and the tables; returns the table."""
    key = default_task(params, task_name)
    check_stage_serves(params, key, "frontier", lambda cls: cls.model_kind == SERVES_KIND, f"{SERVES_KIND}-model")
    task = make_task(params, key)
    score = f"val_{task.monitor}"
    points = collect_points(params, task, report_root)
    for p, flag in zip(points, frontier_flags(points, score, task.mode)):
        p["frontier"] = flag
    ranked = best_per_family(points, score, task.mode)
    out = report_dir("frontier", task.key, report_root)
    out.mkdir(parents=True, exist_ok=True)
    frontier_plot(
        points, score, out / "frontier.png", f"{task.key} ({params['profile']} profile): {score} against parameters"
    )
    lines = [f"| family | code | parameters | {score} | from | points |", "|---|---|---:|---:|---|---:|"]
    lines += [
        f"| {f} | {b['code']} | {b['num_params']:,} | {b[score]:.4f} | {b['source']} | {b['points']} |"
        for f, b in ranked.items()
    ]
    atomic_write_text(
        out / "frontier.md",
        f"# {task.key}: best model per family ({params['profile']} profile)\n\n" + "\n".join(lines) + "\n",
    )
    atomic_write_text(
        out / "frontier.json",
        json.dumps({"score": score, "mode": task.mode, "best": ranked, "points": points}, indent=2) + "\n",
    )
    print("\n".join(lines), flush=True)
    return ranked


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "whose models to plot")
    args = parser.parse_args(argv)
    frontier(params_from(args), args.task)


if __name__ == "__main__":
    main()
