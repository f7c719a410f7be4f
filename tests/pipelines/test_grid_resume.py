"""scripts/grid_resume.py: a claims grid resumes only from the points this checkout's code and params made; a point
trained at other code, or any point once the grid's params changed since claims/dvc.lock, runs again (else a stale
grid piece would run nothing and DVC would record old numbers as made by the new code)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from scripts import grid_resume, park
from swarmlab.drive.ablations import grid_points
from swarmlab.drive.params import load_params
from swarmlab.engine.device import native_bf16
from tests.conftest import REPO_ROOT

GRID = "g"
BF16_HERE = grid_resume.bf16_here  # the fixture below replaces it in every test


@pytest.fixture(autouse=True)
def _precision_unknown(monkeypatch):
    """The toy checkouts here hold no resolvable params: their points' precision is not checked (its own tests are
    below, on the repository's grids)."""
    monkeypatch.setattr(grid_resume, "bf16_here", lambda repo, grid: {})


def _checkout(root: Path) -> Path:
    for name in park.CODE_DIRS:
        (root / name).mkdir(parents=True)
        (root / name / "code.py").write_text(f"# {name}\n")
    (root / "params.yaml").write_text(yaml.safe_dump({"defaults": {"ablations": {GRID: {"lr": 1}}}}))
    return root


def _kept(repo: Path, codes: dict[str, str | None], grid: str = GRID) -> Path:
    """Kept results of ``grid``: one ok point per entry of ``codes`` (its run's train-record code; None: none)."""
    kept = repo / grid_resume.KEPT / grid
    kept.mkdir(parents=True)
    points = [
        {
            "point": name,
            "label": name,
            "model": "m",
            "overrides": {"x": name},
            "status": "ok",
            "train": {"m-seed0": {"code": code} if code else {}},
            "evaluate": {"m-seed0": {"test_loss": 1.0}},
        }
        for name, code in codes.items()
    ]
    points.append({"point": "z", "label": "z", "model": "m", "overrides": {"x": "z"}, "status": "not run"})
    (kept / "results.json").write_text(json.dumps({"grid": grid, "points": points}))
    return kept


def _work_points(repo: Path) -> dict[str, dict]:
    results = json.loads((repo / park.WORK / "reports" / "ablations" / GRID / "results.json").read_text())
    return {p["point"]: p for p in results["points"]}


def test_points_trained_at_other_code_run_again_and_the_kept_results_are_untouched(tmp_path):
    repo = _checkout(tmp_path)
    code = park.code_hash(repo)[:16]
    kept = _kept(repo, {"a": code, "b": "4f6217c2432faeba", "c": None})
    before = (kept / "results.json").read_text()
    why = grid_resume.prepare(repo, GRID)
    assert sorted(why) == ["b", "c"]
    assert "trained at code 4f6217c2432faeba" in why["b"] and "none recorded" in why["c"]
    work = _work_points(repo)
    assert work["a"]["status"] == "ok" and work["a"]["evaluate"]  # made by this code: kept, numbers and all
    assert work["b"] == {"point": "b", "label": "b", "model": "m", "overrides": {"x": "b"}, "status": "not run"}
    assert work["c"]["status"] == "not run" and work["z"]["status"] == "not run"
    assert (kept / "results.json").read_text() == before  # the committed results stay as they are
    assert grid_resume.prepare(repo, GRID) == {}  # the work folder's copy is marked: a second pass finds nothing


def test_a_code_change_after_the_points_ran_marks_them_all(tmp_path):
    repo = _checkout(tmp_path)
    code = park.code_hash(repo)[:16]
    _kept(repo, {"a": code, "b": code})
    (repo / "models" / "code.py").write_text("# models, changed\n")
    assert sorted(grid_resume.prepare(repo, GRID)) == ["a", "b"]


def test_a_point_whose_runs_disagree_runs_again():
    results = {
        "points": [{"point": "a", "status": "ok", "train": {"r0": {"code": "x" * 16}, "r1": {"code": "y" * 16}}}]
    }
    assert list(grid_resume.stale_points(results, "x" * 64, [])) == ["a"]
    results["points"][0]["train"]["r1"]["code"] = "x" * 16
    assert grid_resume.stale_points(results, "x" * 64, []) == {}


def test_changed_params_of_the_grid_rerun_every_point_even_at_the_same_code(tmp_path):
    repo = _checkout(tmp_path)
    code = park.code_hash(repo)[:16]
    _kept(repo, {"a": code, "b": code})
    lock = {
        "stages": {f"grid@{GRID}": {"cmd": "c", "params": {"params.yaml": {f"defaults.ablations.{GRID}": {"lr": 1}}}}}
    }
    (repo / "claims").mkdir()
    (repo / "claims" / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert grid_resume.prepare(repo, GRID) == {}  # the lock's params are params.yaml's
    shutil.rmtree(repo / park.WORK)
    (repo / "params.yaml").write_text(yaml.safe_dump({"defaults": {"ablations": {GRID: {"lr": 2}}}}))
    why = grid_resume.prepare(repo, GRID)
    assert sorted(why) == ["a", "b"] and f"defaults.ablations.{GRID}" in why["a"]


def test_an_unfinished_work_folder_is_checked_in_place_and_nothing_kept_means_nothing_to_do(tmp_path):
    repo = _checkout(tmp_path)
    assert grid_resume.prepare(repo, GRID) == {}  # no results anywhere: every point runs
    assert not (repo / park.WORK).exists()
    work = repo / park.WORK / "reports" / "ablations" / GRID
    work.mkdir(parents=True)
    (work / "results.json").write_text(
        json.dumps({"points": [{"point": "a", "status": "ok", "train": {"r": {"code": "0" * 16}}}]})
    )
    assert list(grid_resume.prepare(repo, GRID)) == ["a"]  # a killed run's own results, from other code


def test_the_command_line_names_each_point_and_refuses_a_folder_that_is_no_checkout(tmp_path):
    repo = _checkout(tmp_path / "repo")
    shutil.copy(REPO_ROOT / "params.yaml", repo / "params.yaml")  # a real grid: its points' precision resolves
    _kept(repo, {"a": "0" * 16}, grid="augment")
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / "grid_resume.py")]
    proc = subprocess.run([*cmd, "augment", "--repo", str(repo)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "[claims] grid augment: point a runs again: trained at code 0000000000000000" in proc.stderr
    proc = subprocess.run([*cmd, GRID, "--repo", str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --repo") and proc.stderr.count("\n") == 1


def test_a_point_trained_in_another_precision_runs_again():
    """A grid resumed on another CPU class: bf16 autocast points beside fp32 ones would not compare."""
    code = "x" * 16
    results = {
        "points": [
            {"point": "a", "status": "ok", "train": {"r0": {"code": code, "bf16_autocast": True}}},
            {"point": "b", "status": "ok", "train": {"r0": {"code": code, "bf16_autocast": False}}},
            {
                "point": "c",
                "status": "ok",
                "train": {"r0": {"code": code}, "r1": {"code": code, "bf16_autocast": True}},
            },
        ]
    }
    why = grid_resume.stale_points(results, code, [], {"a": True, "b": True, "c": True})
    assert sorted(why) == ["b", "c"]
    assert "trained in fp32, this machine trains it in bf16 autocast" in why["b"]
    assert "fp32 and bf16 autocast" in why["c"]
    assert sorted(grid_resume.stale_points(results, code, [], {"a": False, "b": False, "c": False})) == ["a", "c"]
    assert grid_resume.stale_points(results, code, [], None) == {}  # precision unknown: not checked


def test_the_precision_of_each_point_here_is_what_its_runs_would_resolve():
    points = [p["point"] for p in grid_points(load_params(REPO_ROOT / "params.yaml", profile="claims"), "augment")]
    native = native_bf16(torch.device("cpu"))
    assert BF16_HERE(REPO_ROOT, "augment") == {p: native for p in points}  # imdb trains at amp: auto
