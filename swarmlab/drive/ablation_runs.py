"""One point of an ablation grid run end to end: the generic stages (by default ``train`` then ``evaluate``) as
subprocesses in a workspace of its own, ``outputs/ablations/<grid>/<point>/`` (``SWARMLAB_WORKDIR``), whose
``params.yaml`` is the point's params, with the data folders it reuses symlinked in; its entry of results.json is
read back from the workspace's metrics, and its MLflow runs are tagged and renamed ``<run> [<grid> <point>]``.

What made a point (``point_made``: the code, the point's settings, the precision its runs train in here) is recorded
in its entry and in its workspace (``made.json``), so that ``--resume`` keeps a finished point, or continues an
interrupted one, only when this checkout on this machine would make the same: else a stale grid would run nothing
and DVC would record the old numbers as made by the new code, or a grid resumed on another CPU class would set bf16
points beside fp32 ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from swarmlab.drive.ablations import point_params, write_params_file
from swarmlab.drive.records import code_hash
from swarmlab.drive.run_config import train_config
from swarmlab.engine.device import resolve_amp, resolve_device
from swarmlab.errors import SwarmlabError
from swarmlab.io import atomic_write_text
from swarmlab.log import get_logger
from swarmlab.paths import REPO_ROOT, WORK_ROOT, tracking_uri
from swarmlab.drive.runs import make_task, task_runs
from swarmlab.tracking import open_client, unique_name

logger = get_logger(__name__)

TASK_STAGES = ("train", "evaluate", "data", "sample")  # generic stages that take --task
DEFAULT_STAGES = ("train", "evaluate")
# the resolved sections a point's runs read besides its task's own (the params claims/dvc.yaml's grid stage lists)
POINT_SECTIONS = ("seed", "prepare", "augment", "tokenize", "train", "evaluate")
MADE_FILE = "made.json"


def point_made(params: dict, spec: dict, point: dict, grid: str) -> dict:
    """What makes the point's results here: ``code`` (the train fingerprint's code hash, swarmlab/drive/records.py),
    ``settings`` (a hash of the grid, the point's values and every section its runs read, as resolved) and
    ``precision`` (bf16 autocast or fp32 per model, as ``train.amp`` resolves on this machine). The data the point
    reuses is the pipeline's own output of those settings; the shared datasets are not hashed here."""
    p = point_params(params, spec, point, grid)
    task = spec["task"]
    settings = {
        "grid": {k: v for k, v in spec.items() if k != "description"},
        "point": point["overrides"],
        "task": p["tasks"][task],
        **{k: p.get(k) for k in POINT_SECTIONS},
    }
    precision = {}
    for model in p["tasks"][task].get("models") or []:
        cfg = train_config(p, task, model)
        precision[model] = "bf16 autocast" if resolve_amp(cfg.amp, resolve_device(cfg.device)) else "fp32"
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()
    return {"code": code_hash()[:16], "settings": digest[:16], "precision": precision}


def made_differs(recorded: dict | None, now: dict) -> str | None:
    """Why a point ``recorded`` as made so cannot be kept where it would be made as ``now``; None when the same."""
    if not recorded:
        return "it records nothing of the code, settings and precision that made it"
    diff = [f"{k} {recorded.get(k)} -> {now[k]}" for k in ("code", "settings") if recorded.get(k) != now[k]]
    if recorded.get("precision") != now["precision"]:
        diff.append(f"precision {recorded.get('precision')} -> {now['precision']} (another CPU class)")
    return ", ".join(diff) or None


def run_point(
    params: dict,
    spec: dict,
    point: dict,
    grid: str,
    *,
    root: Path,
    tracking: bool,
    resume: bool = False,
    made: dict | None = None,
) -> dict:
    """Run the point's stages in its own workspace; returns its entry of results.json. ``resume`` keeps what an
    interrupted pass left in the workspace when it was made as ``made`` (``point_made``, by default computed here):
    the train stage keeps its finished runs (same settings, code and data) and continues its interrupted one, so a
    killed grid loses at most the evaluations since a run's last checkpoint. A workspace made otherwise starts afresh.
    """
    made = made or point_made(params, spec, point, grid)
    task = spec["task"]
    p = point_params(params, spec, point, grid)
    steps = make_task(p, task).data_steps()  # a data step of the task (IMDB's augment) runs as the data stage's step
    stages = list(spec.get("stages") or DEFAULT_STAGES)
    unknown = [s for s in stages if s not in steps and s not in TASK_STAGES]
    if unknown:
        raise SwarmlabError(
            f"ablations.{grid}.stages: {unknown} are not stages a point can run: {', '.join([*TASK_STAGES, *steps])}"
        )
    side = root / point["point"]
    if side.exists() and resume:
        record = side / MADE_FILE
        why = made_differs(json.loads(record.read_text()) if record.is_file() else None, made)
        if why:
            logger.info(f"[{grid}/{point['point']}] --resume: {side} was made otherwise ({why}): starting afresh")
            shutil.rmtree(side)
        else:
            logger.info(f"[{grid}/{point['point']}] --resume: continuing in {side}")
    elif side.exists():
        shutil.rmtree(side)
    side.mkdir(parents=True, exist_ok=True)
    atomic_write_text(side / MADE_FILE, json.dumps(made, sort_keys=True) + "\n")
    for rel in spec.get("reuse", ["data"]):
        src, dst = WORK_ROOT / rel, side / rel
        if not src.exists():
            raise SwarmlabError(f"ablations.{grid}.reuse: {src} does not exist: build it first (dvc repro)")
        if dst.is_symlink() and dst.resolve() == src.resolve():
            continue  # linked on the interrupted pass
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        elif dst.exists():
            shutil.rmtree(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.symlink_to(src, target_is_directory=src.is_dir())
    write_params_file(p, side / "params.yaml")
    env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(side),
        "MLFLOW_TRACKING_URI": tracking_uri(),
        # evaluate names the point in its lines of the repository's test-read log (swarmlab/drive/report/testsplit.py)
        "SWARMLAB_ABLATION_GRID": grid,
        "SWARMLAB_ABLATION_POINT": point["point"],
    }
    started, log = time.perf_counter(), side / "run.log"
    commands = []
    for stage in stages:
        module = "data" if stage in steps else stage
        cmd = [sys.executable, "-m", f"pipelines.{module}", "--params", str(side / "params.yaml"), "--task", task]
        cmd += ["--step", stage] if stage in steps else []
        cmd += ["--no-tracking"] if not tracking and stage in ("train", "evaluate") else []
        commands.append(" ".join(cmd[1:]))
        logger.info(f"[{grid}/{point['point']}] {' '.join(cmd[1:3])}")
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
    # the workspace relative to the repo root where it lies inside it, so that a committed results.json names no machine
    where = side.resolve()
    workspace = str(where.relative_to(REPO_ROOT)) if where.is_relative_to(REPO_ROOT) else str(where)
    entry = {
        **point,
        "status": "ok",
        "wall_s": round(time.perf_counter() - started, 1),
        "workspace": workspace,
        "made": made,
    }
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
        tag_runs(entry["runs"], grid, point)
    return entry


def tag_runs(runs: dict, grid: str, point: dict) -> None:
    """Tag each point's runs and name them ``<run> [<grid> <point>] | <profile> | ...``: the point goes in after the
    run key, the rest of the train stage's name stays, and a rerun of the grid gets `` #2`` (names stay unique)."""
    client = open_client()
    for run, run_id in runs.items():
        if not run_id:
            continue
        client.set_tag(run_id, "ablation_grid", grid)
        client.set_tag(run_id, "ablation_point", point["label"])
        info = client.get_run(run_id).info
        name, head = info.run_name or run, f"{run} [{grid} {point['label']}]"
        if name.startswith(head):
            continue  # named on an earlier pass (--resume)
        rest = name[len(run) :] if name.startswith(run) else ""
        client.update_run(run_id, name=unique_name(client, info.experiment_id, head + rest))
