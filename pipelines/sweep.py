"""Stage `sweep@<task>`: hyperparameter sweeps of every model on one task with Ray Tune, compared in MLflow.

    python -m pipelines.sweep --task imdb [--models a,b | all] [--profile smoke|cpu|paper] [--num-samples N]
                              [--address RAY_ADDRESS] [--resume] [--no-tracking] [--data-dir DIR] [--out-dir DIR]

Per model, one Tune experiment in ``outputs/sweep/<task>/ray/<model>``: Optuna's TPE (seeded) proposes
configurations from the model's space in params.yaml (``sweep.spaces``), ASHA stops weak trials early,
and each trial is one training-engine ``fit`` that reports its validation metrics and a checkpoint
at every evaluation (the objective is the best validation metric; the test split is never read). A crashed trial
restarts from its last checkpoint; ``--resume`` continues an interrupted sweep without rerunning
finished trials and with the searcher's state. In MLflow (experiment ``<task>-sweep``): one parent run
``sweep-<model>`` with the best trial's params and metrics, and a nested run per trial.

Writes ``reports/sweep/<task>/best_params.json``, ``summary.md``, ``summary.csv`` and ``chosen.json``. An interrupted
sweep (Ctrl-C) writes only the summaries, its cut trials marked ``interrupted``, leaves best_params.json and
chosen.json as they were and exits 2. Ray runs locally unless ``--address`` (or ``$RAY_ADDRESS``, or
``sweep.address``) names a cluster.

**What the sweep decides** (swarmlab/drive/tuning.py). ``chosen.json`` is a dependency of ``train@``, ``evaluate@`` and
``sample@``: under ``tasks.<task>.tuning: sweep`` it holds each model's chosen settings (the best trial's searched
values, chosen on validation; "did not learn at this budget" for a model whose best trial stayed at chance), and the
final runs train them. Under ``tuning: pinned`` (the default) the stage searches nothing: it records the pins (and
leaves an earlier search's tables as they are), so ``dvc repro`` passes through it in a second; ``--search`` runs the
search anyway, to look (the pins still decide).
"""

from __future__ import annotations

import json
from pathlib import Path

from swarmlab.errors import SwarmlabError, cli
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR
from swarmlab.progress import progress_enabled
from swarmlab.drive.sweep.spec import SweepSpec, resolve_sweep
from swarmlab.drive.stage_cli import add_task_argument, params_from, stage_parser
from swarmlab.drive.sweep.setup import max_evaluations, model_space
from swarmlab.drive.sweep.tables import write_reports
from swarmlab.drive.sweep.tune import check_resumable, load_state, sweep_models
from swarmlab.tracking import check_tracking_uri
from swarmlab.drive.runs import default_task
from swarmlab.drive.sections import task_section
from swarmlab.drive.tuning import pinned_record, sweep_record, write_chosen
from swarmlab.io import atomic_write_text

SWEEP_DIR = OUTPUTS_DIR / "sweep"
REPORT_DIR = REPORTS_DIR / "sweep"


def check_num_samples(num_samples: int | None) -> None:
    if num_samples is not None and num_samples < 1:
        raise SwarmlabError(f"--num-samples must be >= 1, got {num_samples}")


def sweep(
    params: dict,
    *,
    task_name: str | None = None,
    models: list[str] | None = None,
    num_samples: int | None = None,
    address: str | None = None,
    resume: bool = False,
    tracking: bool = True,
    options: dict | None = None,
    out_root: Path = SWEEP_DIR,
    report_root: Path = REPORT_DIR,
    callbacks=(),
    lines: bool | None = None,
    num_cpus: int | None = None,
    spec: SweepSpec | None = None,
) -> dict:
    """Sweep every requested model on one task; returns the content of ``best_params.json``.

    Everything that can be checked without Ray (task, models, spaces, data) is checked before Ray starts. The
    params are read once, here: ``resolve_sweep`` gives the spec the driver, its trials and its tables take.
    ``options`` replace keys of the task's options (``--data-dir`` sets ``data_dir``). A caller that has resolved the
    spec already (``main``) passes it as ``spec``.
    """
    spec = spec or resolve_sweep(params, task_name, models=models, options=options)
    check_num_samples(num_samples)
    task = spec.task.build()
    task.model_kwargs()  # the data's facts (a missing data folder is the first error)
    spaces = {m.model: model_space(m, task, spec.spaces) for m in spec.models}
    max_evaluations(spec.horizon)

    out_dir = Path(out_root).resolve() / task.key
    state = load_state(out_dir, task.key, resume)
    if resume:
        check_resumable(out_dir / "ray", [m.model for m in spec.models])
    lines = (not progress_enabled()) if lines is None else lines
    if tracking:
        check_tracking_uri()
    results = sweep_models(
        spec,
        spaces,
        task=task,
        ray_dir=out_dir / "ray",
        state=state,
        address=address,
        num_cpus=num_cpus,
        resume=resume,
        tracking=tracking,
        lines=lines,
        callbacks=callbacks,
        num_samples=num_samples,
    )
    report_dir = Path(report_root).resolve() / task.key
    best = write_reports(report_dir, task=task, profile=spec.profile, state=state, results=results)
    if best is None:  # Ctrl-C: Tune stopped the trials and returned as if done
        cut = ", ".join(f"{n} ({r['unfinished']})" for n, r in results.items() if r["unfinished"])
        raise SwarmlabError(
            f"the sweep of {task.key} was interrupted with trial(s) unfinished: {cut}; they are marked `interrupted` "
            f"in {report_dir / 'summary.md'} and best_params.json was not written: continue it with "
            f"`python -m pipelines.sweep --task {task.key} --resume`"
        )
    if spec.settings.get("past_warmup"):
        check_past_warmup(spec, results, report_dir)
    if task_section(params, task.key).tuning == "sweep":
        record = sweep_record(
            key=task.key,
            profile=spec.profile,
            sweep_id=state["sweep_id"],
            metric=best["metric"],
            mode=task.mode,
            results=results,
            spaces=spaces,
            budget=spec.horizon,
            chance=task.chance("val"),
        )
    else:
        record = pinned_record(task.key, spec.profile)
    write_chosen(report_dir, record)
    return best


def within_warmup(spec: SweepSpec, results: dict) -> dict[str, str]:
    """Per model whose finished trials did not all train past their warmup steps: which, and how far they got."""
    short = {}
    for name, res in results.items():
        pinned = int(spec.model(name).train.get("warmup_steps") or 0)
        cut = [
            (r["trial"], r["steps"], int(r["params"].get("warmup_steps", pinned)))
            for r in res["rows"]
            if r["status"] == "ok" and r.get("steps") is not None
        ]
        cut = [(t, s, w) for t, s, w in cut if s <= w]
        if cut:
            steps = ", ".join(f"{t} at step {s} of {w}" for t, s, w in cut[:3]) + (" ..." if len(cut) > 3 else "")
            short[name] = f"{len(cut)} of {len(res['rows'])} trials ended within warmup ({steps})"
    return short


def check_past_warmup(spec: SweepSpec, results: dict, report_dir: Path) -> None:
    """``sweep.past_warmup``: no model's choice is carried when some model's trials ended within their warmup (its lr
    never reached the value the trial names: the machine decided, not the model). The tables stay as a record."""
    short = within_warmup(spec, results)
    if short:
        which = "; ".join(f"{m}: {why}" for m, why in short.items())
        raise SwarmlabError(
            f"sweep.past_warmup: {which}; nothing was chosen (chosen.json not written; the trials are in "
            f"{report_dir / 'summary.md'}): run the sweep on a faster machine, or give its trials more time"
        )


def check_space_syntax(spaces: dict, key: str) -> None:
    """Every entry of the task's spaces parses (``search_space.parse_spec``: choices, distributions, finite bounds),
    so that a pinned stage refuses the space a search would refuse, without reading the data."""
    from swarmlab.drive.sweep.search_space import parse_spec

    for pattern, space in (spaces.get(key) or {}).items():
        for name, spec in (space or {}).items():
            parse_spec(f"sweep.spaces.{key}.{pattern}.{name}", spec)


def record_pinned(params: dict, task_name: str | None, report_root: Path = REPORT_DIR) -> dict:
    """The stage under ``tuning: pinned``: ``chosen.json`` records the pins; the search's tables (an earlier
    ``--search``'s) are left as they are, or written empty where there are none, so that DVC finds every output."""
    key = default_task(params, task_name)
    task_section(params, key)  # an unknown task or a bad section: one line
    folder = Path(report_root).resolve() / key
    record = pinned_record(key, str(params["profile"]))
    stubs = {
        "best_params.json": json.dumps({**record, "best_model": None}, indent=2) + "\n",
        "summary.md": f"# Sweep of {key}\n\nNone: `tasks.{key}.tuning` is `pinned`, so the models train the settings "
        "params.yaml gives them. Set it to `sweep` to search and train what the search chooses, or run "
        f"`python -m pipelines.sweep --task {key} --search` to look.\n",
        "summary.csv": "rank,model,trial,status\n",
    }
    for name, text in stubs.items():
        if not (folder / name).is_file():
            atomic_write_text(folder / name, text)
    write_chosen(folder, record)
    print(f"sweep {key}: tuning pinned, no search -> {folder / 'chosen.json'}", flush=True)
    return record


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    add_task_argument(parser, "to sweep")
    parser.add_argument(
        "--models",
        default=None,
        help="comma-separated registered models, or `all` for every model "
        "that fits the task (default: the entries of sweep.models that fit "
        "the task, else tasks.<task>.models)",
    )
    parser.add_argument("--num-samples", type=int, default=None, help="trials per model (default: sweep.num_samples)")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join, e.g. 127.0.0.1:6379 or auto "
        "(default: $RAY_ADDRESS, else sweep.address, else a local Ray)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted sweep of this task: finished "
        "trials are kept, unfinished ones continue from their checkpoints",
    )
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    parser.add_argument(
        "--search",
        action="store_true",
        help="search even when tasks.<task>.tuning is pinned (to look: the pins still decide the final runs)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the task's data folder (its `data_dir` option; default: tasks.<task>.options.data_dir)",
    )
    parser.add_argument(
        "--out-dir", default=str(SWEEP_DIR), help="Tune experiments go to <out-dir>/<task>/ray (default: outputs/sweep)"
    )
    parser.add_argument(
        "--report-dir",
        default=str(REPORT_DIR),
        help="best_params.json and summaries go to <report-dir>/<task> (default: reports/sweep)",
    )
    args = parser.parse_args(argv)
    params = params_from(args)
    models = args.models.split(",") if args.models else None
    options = {"data_dir": str(Path(args.data_dir).resolve())} if args.data_dir else None
    # an unknown task or model, a bad section: one line, before anything is written
    spec = resolve_sweep(params, args.task, models=models, options=options)
    if not args.search and task_section(params, spec.task.key).tuning == "pinned":
        check_num_samples(args.num_samples)
        check_space_syntax(spec.spaces, spec.task.key)  # what can be checked without the data: a bad space is an error
        record_pinned(params, spec.task.key, Path(args.report_dir))
        return
    sweep(
        params,
        spec=spec,
        num_samples=args.num_samples,
        address=args.address,
        resume=args.resume,
        tracking=not args.no_tracking,
        out_root=Path(args.out_dir),
        report_root=Path(args.report_dir),
    )


if __name__ == "__main__":
    main()
