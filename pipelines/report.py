"""Stage `report` (last in dvc.yaml): every result under reports/ and in MLflow, beside the papers', in one
document: ``reports/REPORT.md`` and ``reports/report.html`` (self-contained: images as data URIs, no
script, no CDN; renders offline), plus ``reports/report/`` (the figures REPORT.md shows and the data of
the top-level `dvc plots`: training curves and confusion matrices in long form).

It reads, for every task key it can find (params sections, swarmlab/drive/report/presentation.py, the papers' baselines and
the folders under reports/), whatever exists: ``reports/train/<key>/`` (metrics.json, history/),
``reports/evaluate/<key>/`` (metrics.json, plots/), ``reports/sweep/<key>/``, ``reports/data/<key>/``,
``reports/sample/<key>/``, ``reports/frontier/<key>/``, ``reports/memory_scaling/``,
``reports/ablations/<grid>/`` (pipelines/ablate.py), ``reports/side/*/`` and the MLflow
store (run ids, commits, the papers' runs); nothing else. A missing input is a line in the report saying what
is missing and which command makes it, never an error. MLflow is optional: without a store the report says so.

The output is deterministic: the same inputs give the same bytes (no dates, sorted keys, PNGs without metadata).

This module only parses the arguments and hands the library (swarmlab/drive/report/, mapped in docs/reports.md) what it
asks of the model and task registries and of the params (``CODE``).

    python -m pipelines.report [--profile P] [--no-mlflow]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import models
from swarmlab.drive.ablations import grid_points
from swarmlab.drive.stage_cli import params_from, stage_parser
from swarmlab.paths import OUTPUTS_DIR, REPO_ROOT, REPORTS_DIR, tracking_uri
from swarmlab.drive.run_config import model_overrides, train_settings
from swarmlab.errors import cli
from swarmlab.drive.report import assemble
from swarmlab.drive.report.baselines import BASELINES_FILE
from swarmlab.drive.report.mlflow_index import MlflowIndex
from tasks import task_class


def task_info(name: str) -> tuple[str, str, str | None]:
    """A registered task's monitored metric, its mode (min or max) and the kind of model it trains."""
    cls = task_class(name)
    return cls.monitor, cls.mode, cls.model_kind


def model_config(params: dict, task: str, model: str) -> dict:
    """The effective config of ``model`` on ``task``: its registered defaults and the params' overrides."""
    return dataclasses.asdict(models.create_model(model, **model_overrides(params, task, model)).cfg)


# What the report library asks of the model and task registries and of the params (swarmlab imports neither).
CODE = assemble.CodeBase(
    task_info=task_info,
    model_config=model_config,
    models_of_kind=lambda kind: models.list_models(kind=kind),
    train_settings=train_settings,
    grid_points=grid_points,
)


def write_report(
    params: dict,
    *,
    reports: Path = REPORTS_DIR,
    outputs: Path = OUTPUTS_DIR,
    mlflow: bool = True,
    baselines_file: Path = BASELINES_FILE,
) -> dict:
    """Build the report from whatever exists and write REPORT.md, report.html and reports/report/."""
    settings = params.get("report") or {}
    index = MlflowIndex(
        tracking_uri(), settings.get("mlflow_ui", "http://127.0.0.1:5000"), enabled=mlflow, root=REPO_ROOT
    )
    report = assemble.Report(
        params, code=CODE, reports=reports, outputs=outputs, mlflow=index, baselines_file=baselines_file
    )
    assemble.write(report, reports)
    return {
        "tasks": report.keys,
        "missing": report.missing,
        "figures": sorted(report.figures),
        "disagreements": len(report.disagreements),
    }


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--no-mlflow", action="store_true", help="do not read the MLflow store (no run ids or links)")
    args = parser.parse_args(argv)
    result = write_report(params_from(args), mlflow=not args.no_mlflow)
    print(
        f"report: {len(result['tasks'])} tasks, {len(result['figures'])} figures drawn, {len(result['missing'])} missing "
        f"inputs listed, {result['disagreements']} disagreements with the papers -> {REPORTS_DIR / 'REPORT.md'}, "
        f"{REPORTS_DIR / 'report.html'}"
    )


if __name__ == "__main__":
    main()
