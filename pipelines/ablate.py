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
(written after every point; ``--resume`` skips finished points) and ``history/<point>.csv``. The report stage
turns them into a table and a plot.

    python -m pipelines.ablate --grid G [--profile P] [--points a,b] [--resume] [--dry-run] [--no-tracking]
    python -m pipelines.ablate --list
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from swarmlab.ablations import grid_points, grid_spec
from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.paths import OUTPUTS_DIR, REPO_ROOT, REPORTS_DIR, WORK_ROOT, git_commit, tracking_uri
from swarmlab.runs import task_runs
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_write_text

TASK_STAGES = ("train", "evaluate", "data", "sample")  # generic stages that take --task
DEFAULT_STAGES = ("train", "evaluate")


def set_dotted(params: dict, dotted: str, value, where: str) -> None:
    node, parts = params, dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            raise SwarmlabError(f"{where}: {dotted!r} does not name a params section ({part!r} is not a mapping)")
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)


def point_params(params: dict, spec: dict, point: dict, grid: str) -> dict:
    out = copy.deepcopy(params)
    for dotted, value in (spec.get("set") or {}).items():  # what every point shares (a budget, a length): not in labels
        set_dotted(out, dotted, value, f"ablations.{grid}.set")
    for dotted, value in point["overrides"].items():
        set_dotted(out, dotted, value, f"ablations.{grid}.vary")
    if point["model"]:
        out["tasks"][spec["task"]]["models"] = [point["model"]]
    return out


def write_params_file(params: dict, path: Path) -> None:
    """A params.yaml whose defaults are ``params`` as resolved, under a profile of the same name with no overrides."""
    profile = params.get("profile") or "ablation"
    defaults = {k: v for k, v in params.items() if k not in ("profile", "paths", "schedule")}
    path.write_text(
        yaml.safe_dump(
            {
                "profile": profile,
                "paths": params.get("paths") or {},
                "defaults": defaults,
                "profiles": {profile: {}},
                "schedule": params.get("schedule") or {},
            },
            sort_keys=False,
        )
    )


def run_point(params: dict, spec: dict, point: dict, grid: str, *, root: Path, tracking: bool) -> dict:
    """Run the point's stages in its own workspace; returns its entry of results.json."""
    task = spec["task"]
    side = root / point["point"]
    if side.exists():
        shutil.rmtree(side)
    side.mkdir(parents=True)
    for rel in spec.get("reuse", ["data"]):
        src, dst = WORK_ROOT / rel, side / rel
        if not src.exists():
            raise SwarmlabError(f"ablations.{grid}.reuse: {src} does not exist: build it first (dvc repro)")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.symlink_to(src, target_is_directory=src.is_dir())
    p = point_params(params, spec, point, grid)
    write_params_file(p, side / "params.yaml")
    env = {**os.environ, "SWARMLAB_WORKDIR": str(side), "MLFLOW_TRACKING_URI": tracking_uri()}
    started, log = time.perf_counter(), side / "run.log"
    commands = []
    for stage in spec.get("stages") or DEFAULT_STAGES:
        cmd = [sys.executable, "-m", f"pipelines.{stage}", "--params", str(side / "params.yaml")]
        cmd += ["--task", task] if stage in TASK_STAGES else []
        cmd += ["--no-tracking"] if not tracking and stage in ("train", "evaluate") else []
        commands.append(" ".join(cmd[1:]))
        print(f"[{grid}/{point['point']}] {' '.join(cmd[1:3])}", flush=True)
        with open(log, "a") as fh:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            return {
                **point,
                "status": "failed",
                "failed_stage": stage,
                "error": " / ".join(tail),
                "wall_s": round(time.perf_counter() - started, 1),
            }
    entry = {**point, "status": "ok", "wall_s": round(time.perf_counter() - started, 1), "workspace": str(side)}
    runs = [run.name for run in task_runs(p, task)]
    for stage in ("train", "evaluate"):
        f = side / "reports" / stage / task / "metrics.json"
        metrics = json.loads(f.read_text()) if f.is_file() else {}
        entry[stage] = {r: metrics[r] for r in runs if r in metrics}
    entry["runs"] = {}
    for run in runs:
        run_file = side / "outputs" / "train" / task / run / "run.json"
        if run_file.is_file():
            entry["runs"][run] = json.loads(run_file.read_text()).get("run_id")
    if tracking and any(entry["runs"].values()):
        _tag_runs(entry["runs"], grid, point)
    return entry


def _tag_runs(runs: dict, grid: str, point: dict) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri())
    for run, run_id in runs.items():
        if run_id:
            client.set_tag(run_id, "ablation_grid", grid)
            client.set_tag(run_id, "ablation_point", point["label"])
            client.update_run(run_id, name=f"{run} [{grid} {point['label']}]")


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
    points = grid_points(params, grid)
    if only:
        unknown = sorted(set(only) - {p["point"] for p in points})
        if unknown:
            raise SwarmlabError(f"--points {unknown} are not points of grid {grid!r}: {[p['point'] for p in points]}")
        points = [p for p in points if p["point"] in only]
    for point in points:  # every point's params must apply before the first one trains
        point_params(params, spec, point, grid)
    out_dir = (report_root or REPORTS_DIR) / "ablations" / grid
    root = (out_root or OUTPUTS_DIR / "ablations") / grid
    results_file = out_dir / "results.json"
    from tasks import task_class

    cls = task_class((params["tasks"][spec["task"]] or {}).get("task") or spec["task"])
    previous = json.loads(results_file.read_text()) if resume and results_file.is_file() else {}
    done = {e["point"]: e for e in previous.get("points", []) if e.get("status") == "ok"}
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
            print(f"[{grid}/{point['point']}] done before (--resume): skipped", flush=True)
            continue
        entry = run_point(params, spec, point, grid, root=root, tracking=tracking)
        results["points"] = [entry if e["point"] == point["point"] else e for e in results["points"]]
        if entry["status"] == "ok":
            history_src = Path(entry["workspace"]) / "reports" / "train" / spec["task"] / "history"
            for csv_file in sorted(history_src.glob("*.csv")):
                (out_dir / "history").mkdir(parents=True, exist_ok=True)
                suffix = "" if len(entry.get("train", {})) <= 1 else f"__{csv_file.stem}"
                shutil.copy(csv_file, out_dir / "history" / f"{point['point']}{suffix}.csv")
            items = (
                Path(entry["workspace"]) / "reports" / "evaluate" / spec["task"] / "items"
            )  # the ledger's paired tests
            if items.is_dir():
                shutil.copytree(items, out_dir / "items" / point["point"], dirs_exist_ok=True)
        atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(f"[{grid}/{point['point']}] {entry['status']} in {entry['wall_s']} s", flush=True)
    atomic_write_text(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
    return results


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--grid", default=None, help="a grid under `ablations` in params.yaml")
    parser.add_argument("--list", action="store_true", help="list the grids and their points, run nothing")
    parser.add_argument("--points", default=None, help="comma-separated subset of the grid's points (folder names)")
    parser.add_argument("--resume", action="store_true", help="keep the points results.json already has as ok")
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
