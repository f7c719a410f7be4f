"""Ablation grids (params.yaml `ablations:`), one command each: ``python -m pipelines.ablate --grid <name>``.

A grid names a task, the models to train and the params to vary; its points are every model times every
combination of the varied values, each with the grid's ``set`` values (dotted paths too) applied first. Each point runs the generic stages (by default ``train`` then
``evaluate``) as subprocesses in a workspace of its own, ``outputs/ablations/<grid>/<point>/``
(``SWARMLAB_WORKDIR``), whose ``params.yaml`` is the active profile's resolved params with the point's values
set, so that nothing in the repo's data/, outputs/ or reports/ is touched. Folders listed under ``reuse``
(default: the whole ``data`` folder) are symlinked from the work folder, read-only by convention: a grid that
rebuilds data (the augmentation on/off grid reruns ``augment`` and ``tokenize``) reuses only what comes before.

MLflow runs land in the usual store, in the task's experiment, tagged ``ablation_grid`` / ``ablation_point``
and renamed ``<model>-seed<k> [<grid> <point>]``. Results: ``reports/ablations/<grid>/results.json``
(written after every point; ``--resume`` skips finished points and continues an interrupted one in its
workspace, keeping its finished runs, as long as this checkout on this machine makes them the same: the code, the
point's settings and its precision are recorded per point, and a point made otherwise runs again, named with why)
and ``history/<point>.csv``. The report stage
turns them into a table and a plot.

    python -m pipelines.ablate --grid G [--profile P] [--points a,b] [--resume] [--dry-run] [--no-tracking]
    python -m pipelines.ablate --list
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from swarmlab.drive.ablation_runs import DEFAULT_STAGES, made_differs, point_made, run_point
from swarmlab.drive.ablations import check_grid_keys, check_points_differ, grid_points, grid_spec, point_params
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_write_text
from swarmlab.log import get_logger
from swarmlab.paths import OUTPUTS_DIR, REPORTS_DIR, git_commit
from swarmlab.drive.stage_cli import params_from, stage_parser
from tasks import task_class

logger = get_logger(__name__)

# the stages a grid point runs as subprocesses (a grid's `stages`: train and evaluate, and the data steps a grid that
# rebuilds data reruns); swarmlab/drive/dvcdeps.py counts their code as this stage's
STAGE_MODULES = ("data", "train", "evaluate")


def ablate(
    params: dict,
    grid: str,
    *,
    only: list[str] | None = None,
    resume: bool = False,
    dry_run: bool = False,
    tracking: bool = True,
    out_root: Path | None = None,
    report_root: Path | None = None,
) -> dict:
    spec = grid_spec(params, grid)
    check_grid_keys(params, spec, grid)  # a misspelled key would run every point the same
    points = grid_points(params, grid)
    if only:
        unknown = sorted(set(only) - {p["point"] for p in points})
        if unknown:
            raise SwarmlabError(f"--points {unknown} are not points of grid {grid!r}: {[p['point'] for p in points]}")
        points = [p for p in points if p["point"] in only]
    for point in points:  # every point's params must apply before the first one trains
        point_params(params, spec, point, grid)
    check_points_differ(params, spec, grid, grid_points(params, grid))
    out_dir = (report_root or REPORTS_DIR) / "ablations" / grid
    root = (out_root or OUTPUTS_DIR / "ablations") / grid
    results_file = out_dir / "results.json"

    cls = task_class((params["tasks"][spec["task"]] or {}).get("task") or spec["task"])
    previous = json.loads(results_file.read_text()) if resume and results_file.is_file() else {}
    made = {p["point"]: point_made(params, spec, p, grid) for p in grid_points(params, grid)}
    done = {}
    for e in previous.get("points", []):
        if e.get("status") != "ok" or e.get("point") not in made:
            continue
        why = made_differs(e.get("made"), made[e["point"]])
        if why:  # a finished point of other code, settings or precision: not a result of this run
            logger.info(f"[{grid}/{e['point']}] --resume: made otherwise ({why}): runs again")
        else:
            done[e["point"]] = e
    results = {
        "grid": grid,
        "task": spec["task"],
        "monitor": cls.monitor,
        "mode": cls.mode,
        "description": spec.get("description", ""),
        "profile": params.get("profile"),
        "command": f"python -m pipelines.ablate --grid {grid}"
        + (f" --profile {params['profile']}" if params.get("profile") else ""),
        "vary": spec.get("vary") or {},
        "models": spec.get("models") or [],
        "stages": list(spec.get("stages") or DEFAULT_STAGES),
        "git_commit": git_commit(),
        "points": [],
    }
    for point in grid_points(params, grid):  # every point of the grid appears, run or not, in the grid's order
        results["points"].append(done.get(point["point"]) or {**point, "status": "not run"})
    if dry_run:
        for point in points:
            print(f"{grid}: {point['point']}  ({point['label']}) -> {root / point['point']}")
        return results
    for point in points:
        if point["point"] in done:
            logger.info(f"[{grid}/{point['point']}] done before (--resume): skipped")
            continue
        try:
            entry = run_point(
                params, spec, point, grid, root=root, tracking=tracking, resume=resume, made=made[point["point"]]
            )
        except KeyboardInterrupt:  # Ctrl-C: done means done, so the point is marked and the grid is not a result
            results["points"] = [
                {**point, "status": "interrupted"} if e["point"] == point["point"] else e for e in results["points"]
            ]
            atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
            raise SwarmlabError(
                f"grid {grid} was interrupted at point {point['point']}: {results_file} marks it `interrupted` and "
                f"the points after it `not run`; continue with `python -m pipelines.ablate --grid {grid} --resume`"
            ) from None
        results["points"] = [entry if e["point"] == point["point"] else e for e in results["points"]]
        if entry["status"] == "ok":
            history_src = root / point["point"] / "reports" / "train" / spec["task"] / "history"
            for csv_file in sorted(history_src.glob("*.csv")):
                (out_dir / "history").mkdir(parents=True, exist_ok=True)
                suffix = "" if len(entry.get("train", {})) <= 1 else f"__{csv_file.stem}"
                shutil.copy(csv_file, out_dir / "history" / f"{point['point']}{suffix}.csv")
            items = root / point["point"] / "reports" / "evaluate" / spec["task"] / "items"  # the ledger's paired tests
            if items.is_dir():
                shutil.copytree(items, out_dir / "items" / point["point"], dirs_exist_ok=True)
        atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
        logger.info(f"[{grid}/{point['point']}] {entry['status']} in {entry['wall_s']} s")
    atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
    failed = [e for e in results["points"] if e.get("status") == "failed"]
    if failed:  # done means done: a grid with a failed point is not a result (results.json marks which, and why)
        first = failed[0]
        raise SwarmlabError(
            f"grid {grid}: {len(failed)} of {len(results['points'])} point(s) failed, first {first['point']}: "
            f"{first.get('error') or 'see its run.log'} ({results_file} marks them; --resume reruns only those)"
        )
    return results


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--grid", default=None, help="a grid under `ablations` in params.yaml")
    parser.add_argument("--list", action="store_true", help="list the grids and their points, run nothing")
    parser.add_argument("--points", default=None, help="comma-separated subset of the grid's points (folder names)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the points results.json already has as ok, and the finished runs of an interrupted point, where "
        "this checkout on this machine makes them the same (code, settings, precision); the others run again",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the points and their workspaces, run nothing")
    parser.add_argument("--no-tracking", action="store_true", help="train and evaluate without MLflow")
    args = parser.parse_args(argv)
    params = params_from(args)
    if args.list or not args.grid:
        for name in sorted(params.get("ablations") or {}):
            pts = grid_points(params, name)
            print(
                f"{name} ({params['ablations'][name].get('task')}, {len(pts)} points): {', '.join(p['point'] for p in pts)}"
            )
        if not args.list:
            raise SwarmlabError("name a grid with --grid (listed above)")
        return
    ablate(
        params,
        args.grid,
        only=args.points.split(",") if args.points else None,
        resume=args.resume,
        dry_run=args.dry_run,
        tracking=not args.no_tracking,
    )


if __name__ == "__main__":
    main()
