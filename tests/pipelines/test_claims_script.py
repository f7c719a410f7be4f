"""pipelines/claims.py (the claims pieces; claims/dvc.yaml's stages, scripts/claims.sh their wrapper): a grid whose
results were kept in reports/claims (committed), or parked by scripts/park.py, with some points finished resumes from
them in a fresh clone, whose work folder holds nothing yet, instead of training every point again; the data its task
needs is built first (a grid builds none); a wrong name costs one line and touches nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from swarmlab.drive.ablation_runs import point_made
from swarmlab.drive.ablations import grid_points, grid_spec
from swarmlab.drive.params import load_params
from swarmlab.drive.report.testsplit import load_log
from tests.conftest import REPO_ROOT, SHARED_DATASETS

GRID = "long_lr_listops"  # a grid whose task reads no IMDB data: the script builds only ListOps' data


def _clone(tmp_path) -> Path:
    repo = tmp_path / "clone"
    for name in ("scripts", "swarmlab", "pipelines", "tasks", "models"):
        shutil.copytree(REPO_ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "params.yaml", repo / "params.yaml")
    (repo / ".venv").symlink_to(Path(sys.prefix))  # this environment: the script runs .venv/bin/python
    return repo


def _run(repo: Path, *args: str, script: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMLAB_")}
    cmd = ["bash", "scripts/claims.sh"] if script else [sys.executable, "-m", "pipelines.claims", "--profile", "smoke"]
    return subprocess.run(
        [*cmd, *args],
        cwd=repo,
        env={**env, "SWARMLAB_PROGRESS": "0", "SWARMLAB_DATASETS": str(SHARED_DATASETS)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_kept_grid_resumes_in_a_fresh_work_folder(tmp_path):
    repo = _clone(tmp_path)
    kept = repo / "reports" / "claims" / "ablations" / GRID
    kept.mkdir(parents=True)
    params = load_params(profile="smoke")
    points = grid_points(params, GRID)
    # made by this code and settings, in this machine's precision (the clone's code is this checkout's): kept
    made = {p["point"]: point_made(params, grid_spec(params, GRID), p, GRID) for p in points}
    results = {
        "grid": GRID,
        "task": "listops",
        "points": [{**p, "status": "ok", "test": "kept", "made": made[p["point"]]} for p in points],
    }
    (kept / "results.json").write_text(json.dumps(results))
    proc = _run(repo, "grid", GRID)
    # without the carry-over, --resume finds no results in outputs/claims and trains the first point
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "python -m pipelines.data --task listops" in out  # the grid's points would find no data
    assert (repo / "outputs" / "claims" / "data" / "listops" / "meta.json").is_file()
    assert f"resuming grid {GRID} from its results" in out
    assert out.count("done before (--resume): skipped") == len(points)
    work = json.loads((repo / "outputs" / "claims" / "reports" / "ablations" / GRID / "results.json").read_text())
    assert [p["point"] for p in work["points"]] == [p["point"] for p in points]
    assert all(p["status"] == "ok" and p["test"] == "kept" for p in work["points"])
    again = json.loads((kept / "results.json").read_text())  # copied back by the script: the same points
    assert all(p["status"] == "ok" and p["test"] == "kept" for p in again["points"])


def test_a_parked_grid_resumes_in_a_fresh_clone(tmp_path):
    """scripts/park.py save --grid in the clone that ran part of a grid, restore in a fresh one (claims.sh does it
    before dvc repro): the piece keeps the parked points and runs only the one still missing."""
    repo = _clone(tmp_path)
    params = load_params(profile="smoke")
    points = grid_points(params, GRID)
    made = {p["point"]: point_made(params, grid_spec(params, GRID), p, GRID) for p in points}
    ran = repo / "outputs" / "claims" / "reports" / "ablations" / GRID
    ran.mkdir(parents=True)
    entries = [{**p, "status": "ok", "test": "parked", "made": made[p["point"]]} for p in points[:-1]]
    entries.append({**points[-1], "status": "not run"})  # the point in progress when the session ended
    (ran / "results.json").write_text(json.dumps({"grid": GRID, "task": "listops", "points": entries}))
    script = [sys.executable, "scripts/park.py"]
    saved = subprocess.run([*script, "save", "--grid", GRID], cwd=repo, capture_output=True, text=True, timeout=120)
    assert saved.returncode == 0 and f"{len(points) - 1} finished point(s)" in saved.stdout, saved.stderr
    shutil.rmtree(repo / "outputs")  # a fresh clone: nothing in its work folder, the parked points in git
    back = subprocess.run([*script, "restore", "--grid", GRID], cwd=repo, capture_output=True, text=True, timeout=120)
    assert back.returncode == 0 and f"restored {len(points) - 1} finished point(s)" in back.stderr, back.stderr
    proc = _run(repo, "grid", GRID)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"resuming grid {GRID} from its results" not in out  # nothing was kept: the parked points came back
    assert out.count("done before (--resume): skipped") == len(points) - 1
    assert f"[{GRID}/{points[-1]['point']}] ok" in out  # the missing point trained
    kept = json.loads((repo / "reports" / "claims" / "ablations" / GRID / "results.json").read_text())
    assert [p.get("test") for p in kept["points"]] == ["parked"] * (len(points) - 1) + [None]
    assert all(p["status"] == "ok" for p in kept["points"])


def test_the_wrapper_restores_a_parked_grid_before_dvc_and_drops_it_after(tmp_path):
    """scripts/claims.sh: the parked points go into the work folder before `dvc repro` runs the stage, and the parked
    folder goes once the stage succeeded; a sweep piece neither restores nor drops anything (dvc is faked here)."""
    repo = _clone(tmp_path)
    (repo / ".venv").unlink()
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "dvc").write_text('#!/bin/sh\necho "$@" >> dvc.args\n[ -f dvc.fail ] && exit 1\nexit 0\n')
    for f in ("python", "dvc"):
        (bin_dir / f).chmod(0o755)
    params = load_params(profile="claims")
    points = grid_points(params, GRID)
    made = {p["point"]: point_made(params, grid_spec(params, GRID), p, GRID) for p in points}
    ran = repo / "outputs" / "claims" / "reports" / "ablations" / GRID
    ran.mkdir(parents=True)
    entries = [{**points[0], "status": "ok", "made": made[points[0]["point"]]}]
    (ran / "results.json").write_text(json.dumps({"grid": GRID, "task": "listops", "points": entries}))
    saved = subprocess.run(
        [sys.executable, "scripts/park.py", "save", "--grid", GRID], cwd=repo, capture_output=True, text=True
    )
    assert saved.returncode == 0, saved.stderr
    shutil.rmtree(repo / "outputs")
    parked = repo / "claims" / "parked" / "grids" / GRID

    (repo / "dvc.fail").write_text("")  # a stage that fails: what was parked stays
    proc = _run(repo, "grid", GRID, script=True)
    assert proc.returncode != 0 and parked.is_dir()
    assert json.loads((ran / "results.json").read_text())["points"] == entries  # restored before dvc ran
    (repo / "dvc.fail").unlink()
    shutil.rmtree(repo / "outputs")
    proc = _run(repo, "sweep", "listops", script=True)
    assert proc.returncode == 0 and parked.is_dir() and not ran.exists(), proc.stderr
    proc = _run(repo, "grid", GRID, script=True)
    assert proc.returncode == 0, proc.stderr
    assert not parked.exists() and f"grid {GRID} finished" in proc.stderr
    assert (repo / "dvc.args").read_text().split("\n")[:3] == [
        f"repro claims/dvc.yaml:grid@{GRID}",
        "repro claims/dvc.yaml:sweep@listops",
        f"repro claims/dvc.yaml:grid@{GRID}",
    ]


def test_a_wrong_name_is_one_line_and_touches_nothing(tmp_path):
    repo = _clone(tmp_path)
    for args, says, script in (
        (("grid", "long_lr"), "no grid 'long_lr' under ablations", False),
        (("task", "listop"), "unknown task", False),
        (("grid", "long_lr"), "no grid 'long_lr' under ablations", True),  # the wrapper checks before DVC runs
        (("sample", "listops"), "task 'listops' (listops) draws no samples", False),
    ):
        proc = _run(repo, *args, script=script)
        assert proc.returncode == 2
        assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith(f"error: {says}"), proc.stderr
    assert not (repo / "outputs").exists() and not (repo / "reports").exists()


def test_a_task_piece_trains_a_changed_setting_again_and_reads_the_test_again_only_with_retest(tmp_path):
    """The lr search moves a model's lr in params: the piece must train it again (not refuse it, as --resume did),
    and its second read of the test split needs --retest, recorded as a re-read, in the folder and in the log."""
    repo = _clone(tmp_path)
    first = _run(repo, "task", "listops")
    assert first.returncode == 0, first.stdout + first.stderr
    reads = repo / "reports" / "claims" / "evaluate" / "listops" / "test_reads.json"
    assert not any(r["retest"] for r in json.loads(reads.read_text())["reads"])

    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml_for_update  # as `dvc exp run -S` edits it

    raw = parse_yaml_for_update((repo / "params.yaml").read_text(), "params.yaml")
    smoke = raw["profiles"]["smoke"]["tasks"]["listops"]["train"]
    assert "lr" not in smoke
    smoke["lr"] = 2.0e-3
    (repo / "params.yaml").write_text(dumps_yaml(raw))

    refused = _run(repo, "task", "listops")
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2, out
    assert "finished with the same settings" not in out  # every run trained again at the new lr ...
    assert "[claims] python -m pipelines.evaluate" in out and "pass --retest" in out  # ... and evaluate refused

    bad = subprocess.run(  # the switch DVC passes through (a stage has no flags): a wrong value is one line
        [sys.executable, "-m", "pipelines.claims", "--profile", "smoke", "task", "listops"],
        cwd=repo,
        env={**os.environ, "SWARMLAB_RETEST": "yes"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: environment variable SWARMLAB_RETEST='yes'"), (
        bad.stderr
    )
    again = _run(repo, "--retest", "task", "listops")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "finished with the same settings" in again.stdout + again.stderr  # nothing trained a third time
    kept = json.loads(reads.read_text())["reads"]
    runs = len(kept) // 2
    assert len(kept) == 2 * runs and runs > 0
    assert [r["retest"] for r in kept] == [False] * runs + [True] * runs
    assert {r["train_settings"]["lr"] for r in kept[runs:]} == {2.0e-3}
    # the repository's log (the clone's: the script's stages run its code) keeps both reads of every run; the piece's
    # folder kept in reports/claims is replaced, the log only grows
    log = load_log(repo / "reports" / "test_reads.jsonl")
    assert [line["kind"] for line in log] == ["first"] * runs + ["re-read"] * runs
    assert {line["where"] for line in log} == {"outputs/claims/reports/evaluate/listops"}
    assert [line["run"] for line in log[:runs]] == [line["run"] for line in log[runs:]]
