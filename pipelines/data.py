"""Stage `data@<task>`: build a task's data folder (IMDB's splits, generated sets, converted images, ListOps...).

The task writes into an empty temporary sibling of its data folder (``Task.build_data``); the folder is swapped in
only when it succeeds, so a failed or killed run leaves the previous data as it was. Writes ``<data folder>`` and
``reports/data/<task>/metrics.json`` (the task's summary). The folder training reads also gets ``items.json``: the
digests of its validation and test items, recorded in its ``meta.json``, against which training checks its rows.

A task whose data is built in steps (``Task.data_steps``; IMDB: prepare, augment, tokenize) runs one step per call
with ``--step`` (each a cached DVC stage: ``dvc repro tokenize``), or every step in order without it. A step's
settings are the params section of its name, checked for every step before any folder is touched; it writes
``reports/data/<task>/<step>/metrics.json``.

    python -m pipelines.data --task T [--step S] [--profile P]
"""

from __future__ import annotations

import json
from pathlib import Path

from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, atomic_write_text
from swarmlab.paths import REPORTS_DIR, datasets_dir
from swarmlab.drive.runs import default_task, make_task, report_dir
from swarmlab.drive.sections import SECTIONS, section
from swarmlab.drive.sections import seed as check_seed
from swarmlab.drive.stage_cli import add_task_argument, params_from, stage_parser
from tasks.base import Task


def build(
    params: dict,
    task_key: str | None = None,
    *,
    step: str | None = None,
    options: dict | None = None,
    report_root=REPORTS_DIR,
) -> dict:
    """Build the task's data (one step of it, with ``step``); returns the summary of the last step built."""
    task = make_task(params, default_task(params, task_key), options=options)
    if type(task).build_data is Task.build_data:  # the contract's default: the task has no data stage
        raise SwarmlabError(f"task {task.key!r} ({task.name}) has no data stage: it builds no data of its own")
    steps = task.data_steps()
    if step is not None and step not in steps:
        raise SwarmlabError(
            f"--step {step}: task {task.key!r} builds its data in the steps {', '.join(steps)}"
            if steps
            else f"--step {step}: task {task.key!r} builds its data in one step: drop --step"
        )
    seed = check_seed(params)
    todo = [step] if step else list(steps)
    unknown = [s for s in todo if s not in SECTIONS]
    if unknown:
        raise SwarmlabError(f"task {task.key!r} names data steps without a params section: {unknown}")
    settings = {s: section(params, s) for s in todo}  # every step's settings checked before any folder is touched
    summary = {}
    for s in todo or [None]:
        out = steps[s] if s else task.data_dir
        with atomic_dir(out) as tmp:
            if s is None:
                summary = task.build_data(tmp, datasets=datasets_dir(params), seed=seed)
            else:
                summary = task.build_data(tmp, datasets=datasets_dir(params), seed=seed, step=s, settings=settings[s])
            if out == task.data_dir:  # the folder training reads: its val and test items, for the leak check
                record_items(task, tmp)
        folder = report_dir("data", task.key, report_root) / (s or "")
        atomic_write_text(folder / "metrics.json", json.dumps(summary, indent=2) + "\n")
        print(
            f"data {task.key}{f' {s}' if s else ''}: "
            + ", ".join(f"{k} {v}" for k, v in summary.items() if not isinstance(v, dict))
            + f" -> {out}",
            flush=True,
        )
    return summary


def record_items(task, folder: Path) -> None:
    """``items.json`` (``Task.record_items``: the digests of the validation and test items) in the folder just built,
    and its hash in the folder's ``meta.json``: training then checks its rows against it without the test files."""
    record = task.record_items(folder)
    if record is not None:
        meta_path = folder / "meta.json"
        meta = json.loads(meta_path.read_text())
        meta["items"] = record
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "whose data to build")
    parser.add_argument("--step", default=None, help="one step of a task whose data is built in steps (IMDB: tokenize)")
    args = parser.parse_args(argv)
    build(params_from(args), args.task, step=args.step)


if __name__ == "__main__":
    main()
