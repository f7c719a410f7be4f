"""scripts/claims.sh: a grid whose results were kept in reports/claims (committed) with some points finished resumes
from them in a fresh clone, whose work folder holds nothing yet, instead of training every point again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from swarmlab.ablations import grid_points
from swarmlab.params import load_params
from tests.conftest import REPO_ROOT

GRID = "long_lr_listops"  # a grid whose task reads no IMDB data, so the script builds nothing before it


def test_a_kept_grid_resumes_in_a_fresh_work_folder(tmp_path):
    repo = tmp_path / "clone"
    for name in ("scripts", "swarmlab", "pipelines", "tasks", "models"):
        shutil.copytree(REPO_ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "params.yaml", repo / "params.yaml")
    (repo / ".venv").symlink_to(Path(sys.prefix))  # this environment: the script runs .venv/bin/python
    kept = repo / "reports" / "claims" / "ablations" / GRID
    kept.mkdir(parents=True)
    points = grid_points(load_params(profile="smoke"), GRID)
    results = {"grid": GRID, "task": "listops", "points": [{**p, "status": "ok", "test": "kept"} for p in points]}
    (kept / "results.json").write_text(json.dumps(results))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMLAB_")}
    proc = subprocess.run(
        ["bash", "scripts/claims.sh", "--profile", "smoke", "grid", GRID],
        cwd=repo,
        env={**env, "SWARMLAB_PROGRESS": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    # without the carry-over, --resume finds no results in outputs/claims and starts the first point, whose data
    # (outputs/claims/data) does not exist: exit 2
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"resuming grid {GRID} from its results" in out
    assert out.count("done before (--resume): skipped") == len(points)
    work = json.loads((repo / "outputs" / "claims" / "reports" / "ablations" / GRID / "results.json").read_text())
    assert [p["point"] for p in work["points"]] == [p["point"] for p in points]
    assert all(p["status"] == "ok" and p["test"] == "kept" for p in work["points"])
    again = json.loads((kept / "results.json").read_text())  # copied back by the script: the same points
    assert all(p["status"] == "ok" and p["test"] == "kept" for p in again["points"])
