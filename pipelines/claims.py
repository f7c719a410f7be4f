"""Stages `sweep@<task>`, `task@<task>`, `sample@<task>` and `grid@<grid>` of ``claims/dvc.yaml``: one piece of the
`claims` profile.

The claims profile (params.yaml ``profiles.claims``) holds each paper claim's decisive experiment at a CPU scale. Its
pieces take hours, so they run in a work folder of their own, ``outputs/claims`` (``SWARMLAB_WORKDIR`` for the
stages they run; ``--work`` to move it), where the default profile's data, checkpoints and reports stay untouched.
What the claims ledger reads is kept in ``reports/claims/`` (committed), each piece's folders swapped in whole when
the piece succeeded:

* ``sweep <task>``: the task's data where the work folder lacks it, then its sweep (``python -m pipelines.sweep``):
  under ``tasks.<task>.tuning: sweep`` a Ray Tune search of every model of the task at the profile's ``sweep``
  settings, chosen on validation; under ``pinned`` the pins, in seconds. Keeps ``sweep/<task>`` (``chosen.json``
  and the search's tables). A sweep killed before it finished continues from its trials (``--resume``) when the
  piece runs again in the same work folder.
* ``task <task>``: the task's data where the work folder lacks it (IMDB's three steps first when the task reads
  ``data/prepared`` or ``data/tokenized``), the kept ``sweep/<task>/chosen.json`` put back in the work folder (what
  the task's sweep piece chose: ``train`` reads it, and claims/dvc.yaml makes it a dependency), then ``train`` and
  ``evaluate``; keeps ``data/<task>``, ``train/<task>`` and ``evaluate/<task>``. Set ``SWARMLAB_RETEST=1`` (or pass
  ``--retest``) after a setting changed: the changed runs train again and the test split is read again, logged as
  a re-read (``reports/test_reads.jsonl``).
* ``sample <task>``: the task's samples from the checkpoints ``task <task>`` trained; keeps ``sample/<task>``.
* ``grid <grid>``: an ablation grid (``python -m pipelines.ablate --resume``) after its task's data; keeps
  ``ablations/<grid>``. A grid kept with points missing resumes from them, in a fresh clone too.

Each step is the pipeline's own stage, run as a subprocess at ``--profile claims``, so a killed piece resumes: train
continues its interrupted runs from their checkpoints and keeps its finished ones whose settings, code and data are
unchanged; a grid picks up its unfinished points. Run a piece through DVC, so that ``dvc status claims/dvc.yaml``
knows what is stale and ``claims/dvc.lock`` records what made it:

    dvc repro claims/dvc.yaml:task@imdb          (bash scripts/claims.sh task imdb does the same)
    python -m pipelines.claims task imdb [--profile claims] [--retest] [--work outputs/claims]
    python -m pipelines.claims sweep lra_text    (dvc repro claims/dvc.yaml:task@lra_text runs it first)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from swarmlab.drive.ablations import grid_spec
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir
from swarmlab.paths import REPO_ROOT
from swarmlab.drive.runs import make_task
from swarmlab.drive.sections import task_section
from swarmlab.drive.stage_cli import params_from, stage_parser
from swarmlab.drive.tuning import CHOSEN, SWEEP_STATE, chosen_path
from tasks.base import Task

PIECES = ("sweep", "task", "sample", "grid")
# the stages a piece runs, each as `python -m pipelines.<stage>` (a grid point runs data, train and evaluate too):
# their code is the piece's (swarmlab/drive/dvcdeps.py writes it into claims/dvc.yaml)
STAGE_MODULES = {
    "sweep": ("data", "sweep"),
    "task": ("data", "train", "evaluate"),
    "sample": ("sample",),
    "grid": ("data", "ablate", "train", "evaluate"),
}
WORK = REPO_ROOT / "outputs" / "claims"
KEEP = REPO_ROOT / "reports" / "claims"
RETEST_ENV = "SWARMLAB_RETEST"


def plan(params: dict, piece: str, name: str, work: Path = WORK) -> tuple[str, list[str]]:
    """The task ``name`` trains and the tasks whose data to build first, in order (before anything runs: a wrong
    name costs one line). IMDB's data comes first when the task reads ``data/prepared`` or ``data/tokenized``."""
    if piece not in PIECES:
        raise SwarmlabError(f"unknown piece {piece!r}: one of {', '.join(PIECES)}")
    key = grid_spec(params, name)["task"] if piece == "grid" else name
    task = make_task(params, key, root=work)
    if piece == "sample" and type(task).sample is Task.sample:
        raise SwarmlabError(f"task {key!r} ({task.name}) draws no samples: it has no sample piece")
    if piece == "sample":
        return key, []
    imdb = make_task(params, "imdb", root=work)
    reads = {str(v) for v in vars(task.options).values()}
    build = ["imdb"] if reads & {"data/prepared", "data/tokenized"} and not imdb.data_dir.is_dir() else []
    if type(task).build_data is not Task.build_data and not task.data_dir.is_dir():
        build.append(key)
    return key, list(dict.fromkeys(build))


def keep(work: Path, keep_root: Path, what: str) -> None:
    """Copy the work folder's ``reports/<what>`` into ``keep_root/<what>``, swapped in whole (``atomic_dir``: a kill
    leaves the previous copy or the new one, never half of each)."""
    src, dst = work / "reports" / what, keep_root / what
    if not src.exists():
        raise SwarmlabError(f"{src} is missing after its stage ran: nothing to keep in {dst}")
    with atomic_dir(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)


def unfinished_sweep(work: Path, key: str) -> bool:
    """Whether the work folder holds a search of ``key`` that started and did not finish: its state names a sweep
    that the task's ``best_params.json`` does not (a finished search writes its id there; an interrupted one leaves
    the file as it was)."""
    state = work / "outputs" / "sweep" / key / SWEEP_STATE
    if not state.is_file():
        return False
    try:
        sweep_id = json.loads(state.read_text())["sweep_id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SwarmlabError(f"{state} is damaged ({exc}): remove {state.parent} to start the sweep afresh") from None
    best = chosen_path(work, key).with_name("best_params.json")
    try:
        return json.loads(best.read_text()).get("sweep_id") != sweep_id
    except (OSError, ValueError, AttributeError):
        return True  # no record of this search finishing


def restore_chosen(work: Path, keep_root: Path, key: str) -> None:
    """Put the kept ``sweep/<key>/chosen.json`` (claims/dvc.yaml's dependency of the task piece) in the work folder,
    where ``train`` reads it; nothing when none was kept (a task whose sweep piece never ran: train says so when
    its tuning is ``sweep``)."""
    kept = keep_root / "sweep" / key / CHOSEN
    if kept.is_file():
        chosen_path(work, key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kept, chosen_path(work, key))


def run_piece(
    params: dict,
    profile: str,
    piece: str,
    name: str,
    *,
    work: Path = WORK,
    keep_root: Path = KEEP,
    retest: bool = False,
    params_file: str | None = None,
) -> None:
    key, build = plan(params, piece, name, work)
    if retest and piece != "task":
        raise SwarmlabError("--retest is for task pieces (train, then evaluate): a grid evaluates its own points")
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SWARMLAB_WORKDIR": str(work)}
    env.pop(RETEST_ENV, None)
    extra = ["--profile", profile] + (["--params", params_file] if params_file else [])

    def stage(module: str, *args: str) -> None:
        cmd = [sys.executable, "-m", f"pipelines.{module}", *args, *extra]
        print(
            f"[claims] python -m pipelines.{module} {' '.join(args)} --profile {profile}", file=sys.stderr, flush=True
        )
        rc = subprocess.run(cmd, env=env, cwd=REPO_ROOT).returncode
        if rc != 0:
            raise SystemExit(rc)  # the stage printed its own error; its code is the piece's

    for data_key in build:
        stage("data", "--task", data_key)
    if piece == "grid":
        grid_work, grid_kept = work / "reports" / "ablations" / name, keep_root / "ablations" / name
        if not grid_work.exists() and (grid_kept / "results.json").is_file():
            # kept in reports/claims but not in this work folder (a fresh clone, another machine): --resume then
            # runs only the points still missing
            shutil.copytree(grid_kept, grid_work)
            print(f"[claims] resuming grid {name} from its results in {grid_kept}", file=sys.stderr)
        stage("ablate", "--grid", name, "--resume")
        keep(work, keep_root, f"ablations/{name}")
    elif piece == "sample":
        stage("sample", "--task", key)
        keep(work, keep_root, f"sample/{key}")
    elif piece == "sweep":
        resume = task_section(params, key).tuning == "sweep" and unfinished_sweep(work, key)
        if resume:
            print(f"[claims] continuing the unfinished sweep of {key} in {work}", file=sys.stderr)
        stage("sweep", "--task", key, *(["--resume"] if resume else []))
        keep(work, keep_root, f"sweep/{key}")
    else:
        restore_chosen(work, keep_root, key)
        stage("train", "--task", key)
        stage("evaluate", "--task", key, *(["--retest"] if retest else []))
        keep(work, keep_root, f"data/{key}")
        keep(work, keep_root, f"train/{key}")
        keep(work, keep_root, f"evaluate/{key}")
    print(f"[claims] {piece} {name}: results in {keep_root}", file=sys.stderr)


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    parser.set_defaults(profile="claims")
    parser.add_argument("piece", choices=PIECES, help="sweep, task, sample or grid")
    parser.add_argument("name", help="a task key (sweep, task, sample) or a grid under ablations (grid)")
    parser.add_argument(
        "--retest",
        action="store_true",
        help=f"read the test split again after a setting changed (also ${RETEST_ENV}=1, for dvc repro)",
    )
    parser.add_argument("--check", action="store_true", help="check the piece and its name, run nothing")
    parser.add_argument("--work", default=None, help=f"work folder (default: {WORK.relative_to(REPO_ROOT)})")
    args = parser.parse_args(argv)
    flag = os.environ.get(RETEST_ENV, "")
    if flag not in ("", "0", "1"):
        raise SwarmlabError(f"environment variable {RETEST_ENV}={flag!r}: use one of 0, 1 (or unset it)")
    params = params_from(args)
    work = Path(args.work).resolve() if args.work else WORK
    if args.check:
        plan(params, args.piece, args.name, work)
        return
    run_piece(
        params,
        args.profile,
        args.piece,
        args.name,
        work=work,
        retest=args.retest or flag == "1",
        params_file=args.params,
    )


if __name__ == "__main__":
    main()
