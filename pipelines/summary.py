"""Stage `summary`: ``reports/summary.json``, the pipeline's only DVC metrics file (``swarmlab.drive.report.summary``),
and the same headlines one file per task and model, ``reports/summary/<task>/<model>.json``.

Per task of the params, per model: the task's headline test metric (``test_<monitor>``) averaged over seeds, its 95%
interval, the seeds and the net training time, read from ``reports/train/<task>/`` and ``reports/evaluate/<task>/``.
``dvc metrics show`` / ``dvc exp show`` then print a few dozen columns instead of every run's every number (those
stay in the per-task metrics files, plain outputs of their stages). ``dvc metrics show reports/summary`` prints the
per-model files as one row each. ``--show`` prints the file as a table (the end of ``scripts/repro.sh``) without
recomputing it.

    python -m pipelines.summary [--profile P] [--show]
"""

from __future__ import annotations

import json
from pathlib import Path

from swarmlab.drive.stage_cli import params_from, stage_parser
from swarmlab.paths import REPORTS_DIR
from swarmlab.errors import SwarmlabError, cli
from swarmlab.drive.report.summary import render, summarize, write_rows, write_summary
from tasks import task_class

SUMMARY_FILE = "summary.json"
ROWS_DIR = "summary"


def monitors(params: dict) -> dict[str, str]:
    """Task key -> its validation metric (the registered task's ``monitor``), for every task section."""
    sections = params.get("tasks") or {}
    return {key: task_class((section or {}).get("task") or key).monitor for key, section in sections.items()}


def summary(params: dict, reports: Path = REPORTS_DIR) -> dict:
    """Write ``<reports>/summary.json`` and ``<reports>/summary/<task>/<model>.json``, and return the summary."""
    result = summarize(Path(reports), monitors(params), default_seed=int(params.get("seed", 0)))
    write_rows(Path(reports) / ROWS_DIR, result)
    write_summary(Path(reports) / SUMMARY_FILE, result)
    return result


def show(reports: Path = REPORTS_DIR) -> str:
    path = Path(reports) / SUMMARY_FILE
    if not path.is_file():
        raise SwarmlabError(f"{path} is missing: run `dvc repro summary` (or python -m pipelines.summary)")
    return render(json.loads(path.read_text()))


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--show", action="store_true", help="print reports/summary.json as a table; compute nothing")
    args = parser.parse_args(argv)
    if not args.show:
        summary(params_from(args))
    print(show())


if __name__ == "__main__":
    main()
