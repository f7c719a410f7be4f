"""Stage `paper_baselines`: the papers' numbers (pipelines/paper_baselines.yaml) as MLflow runs, idempotently.

One finished run per entry in the experiment ``paper-baselines`` (``swarmlab/drive/report/baseline_runs.py``): an
unchanged entry is left alone, a changed one replaces its run, a run whose key left the table is deleted.

Every experiment of the store is tagged ``mlflow.experimentKind=custom_model_development``, so that the
MLflow 3 UI opens it in the model-training view (its runs table) rather than the GenAI traces view.

Writes ``reports/paper_baselines/baselines.md`` (the table as logged) and ``runs.json`` (key -> run id).

    python -m pipelines.paper_baselines [--no-tracking]
"""

from __future__ import annotations

import json
from pathlib import Path

from swarmlab.errors import cli
from swarmlab.io import atomic_write_text
from swarmlab.paths import REPORTS_DIR, tracking_uri
from swarmlab.tracking import check_tracking_uri
from swarmlab.drive.report.baseline_runs import baselines_markdown, log_baselines
from swarmlab.drive.report.baselines import BASELINES_FILE, EXPERIMENT, load_baselines
from swarmlab.drive.stage_cli import params_from, stage_parser

OUT_DIR = REPORTS_DIR / "paper_baselines"


def run_stage(*, tracking: bool = True, out_dir: Path = OUT_DIR, table: Path = BASELINES_FILE) -> dict:
    sources, entries = load_baselines(table)
    result = log_baselines(sources, entries) if tracking else {"experiment_id": None, "runs": {}}
    atomic_write_text(Path(out_dir) / "baselines.md", baselines_markdown(sources, entries))
    if not tracking and (Path(out_dir) / "runs.json").is_file():
        return result  # nothing was logged: the run ids an earlier run recorded stay as they are
    atomic_write_text(
        Path(out_dir) / "runs.json",
        json.dumps(
            {"experiment": EXPERIMENT, "experiment_id": result["experiment_id"], "runs": result["runs"]},
            indent=2,
            sort_keys=True,
        )
        + "\n",
    )
    return result


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--no-tracking", action="store_true", help="write the table only; log nothing to MLflow")
    args = parser.parse_args(argv)
    params_from(args)  # the params file must be valid like for every stage (the table itself is not in it)
    if not args.no_tracking:
        check_tracking_uri()  # one line, before anything is written, for a store that cannot work
    result = run_stage(tracking=not args.no_tracking)
    if args.no_tracking:
        print("paper_baselines: table written; nothing logged (--no-tracking)")
    else:
        print(
            f"paper_baselines: {len(result['runs'])} runs in experiment {EXPERIMENT!r} (id {result['experiment_id']}): "
            f"{result['created']} created, {result['replaced']} replaced, {result['deleted']} deleted; store {tracking_uri()}"
        )


if __name__ == "__main__":
    main()
