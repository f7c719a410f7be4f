"""Stage `data@<task>`: build a task's data folder (generated sets, converted images, ListOps expressions...).

The task writes into an empty temporary sibling of its data folder (``Task.build_data``); the folder is
swapped in only when it succeeds, so a failed or killed run leaves the previous data as it was. Writes
``<data folder>`` and ``reports/data/<task>/metrics.json`` (the task's summary).

    python -m pipelines.data --task T [--profile P]
"""

from __future__ import annotations

import json

from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.paths import REPORTS_DIR, datasets_dir
from swarmlab.runs import default_task, make_task, report_dir
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, atomic_write_text
from tasks.base import Task


def build(params: dict, task_key: str | None = None, *, options: dict | None = None, report_root=REPORTS_DIR) -> dict:
    task = make_task(params, default_task(params, task_key), options=options)
    if type(task).build_data is Task.build_data:  # the contract's default: the task has no generic data stage
        raise SwarmlabError(
            f"task {task.key!r} ({task.name}) has no data@ stage: its data comes from stages of its own"
        )
    out = task.data_dir
    with atomic_dir(out) as tmp:
        summary = task.build_data(tmp, datasets=datasets_dir(params), seed=params["seed"])
    atomic_write_text(report_dir("data", task.key, report_root) / "metrics.json", json.dumps(summary, indent=2) + "\n")
    print(
        f"data {task.key}: "
        + ", ".join(f"{k} {v}" for k, v in summary.items() if not isinstance(v, dict))
        + f" -> {out}",
        flush=True,
    )
    return summary


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--task", default=None, help="task section (tasks.<task>) whose data to build")
    args = parser.parse_args(argv)
    build(params_from(args), args.task)


if __name__ == "__main__":
    main()
