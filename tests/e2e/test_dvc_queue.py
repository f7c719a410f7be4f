"""DVC's own ways to run experiments apart from the workspace (#38 item 1): `dvc exp run --temp`, `dvc exp run
--queue` and `dvc queue start -j 2` run in copies under `.dvc/tmp/exps/`, and the stages there read the shared
datasets at `paths.datasets` (relative, `../shared/datasets`) as they do in the workspace (swarmlab/dvc_copies.py).

The stage is IMDB's `prepare` at the smoke profile (seconds, reads the shared IMDB parquet files): each experiment
gives it another seed, so each draws other splits, and `dvc exp show` lists them all, each with its own data.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import SHARED_DATASETS
from tests.e2e.test_pipeline_e2e import GIT_IDENTITY, copy_repo, stage_env

pytestmark = pytest.mark.slow


def dvc(repo, env, *args, timeout=300):
    proc = subprocess.run(["dvc", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_temporary_and_queued_experiments_read_the_shared_datasets(tmp_path):
    # the copy sits where the repository does relative to its datasets: <tmp>/repo and <tmp>/shared/datasets
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "datasets").symlink_to(SHARED_DATASETS, target_is_directory=True)
    repo = copy_repo(tmp_path / "repo")
    env = stage_env(tmp_path / "mlruns.db")
    env.pop("SWARMLAB_DATASETS", None)  # the relative paths.datasets of params.yaml, as a user has it
    linked = subprocess.run(
        ["python", "-m", "swarmlab.dvc_copies"], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert ".dvc/tmp/exps/shared ->" in linked and ".dvc/tmp/exps/standalone/shared ->" in linked, linked

    # the baseline a user has: the stage run in the workspace and committed, so dvc.lock names the datasets by the
    # relative path (which DVC shows as `../shared/datasets/imdb` in the workspace but `shared/datasets/imdb` in a
    # commit: the README's command hides the workspace row, where that one column would differ)
    dvc(repo, env, "repro", "prepare")
    git_env = {**env, **GIT_IDENTITY}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=git_env, check=True)
    subprocess.run(["git", "commit", "-qm", "prepare"], cwd=repo, env=git_env, check=True)

    dvc(repo, env, "exp", "run", "--temp", "-n", "temp", "-S", "profile=smoke", "-S", "defaults.seed=1", "prepare")
    for seed in (2, 3):
        dvc(
            repo,
            env,
            "exp",
            "run",
            "--queue",
            "-n",
            f"queued{seed}",
            "-S",
            "profile=smoke",
            "-S",
            f"defaults.seed={seed}",
            "prepare",
        )
    dvc(repo, env, "queue", "start", "-j", "2")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = dvc(repo, env, "queue", "status")
        if not any(word in status for word in ("Running", "Queued")):
            break
        time.sleep(3)
    assert "Failed" not in status and status.count("Success") == 2, status
    dvc(repo, env, "queue", "stop", timeout=120)

    shown = json.loads(dvc(repo, env, "exp", "show", "--json"))
    runs = {
        exp["name"]: exp["data"]
        for baseline in shown
        for exp in (baseline.get("experiments") or [])
        for exp in exp["revs"]
    }
    assert set(runs) == {"temp", "queued2", "queued3"}, sorted(runs)
    seeds = {name: data["params"]["params.yaml"]["data"]["defaults"]["seed"] for name, data in runs.items()}
    assert seeds == {"temp": 1, "queued2": 2, "queued3": 3}
    prepared = {name: data["outs"]["data/prepared"]["hash"] for name, data in runs.items()}
    assert all(prepared.values()) and len(set(prepared.values())) == 3, prepared  # each seed: other splits

    # the README's view of a change beside its result fits a 200-column terminal whole: no column collapsed to "…"
    table = dvc(repo, {**env, "COLUMNS": "200"}, "exp", "show", "--only-changed", "--hide-workspace", "--no-pager")
    assert max(map(len, table.splitlines())) <= 200, table
    for word in ("Experiment", "profile", "defaults.seed", "[temp]", "[queued2]", "[queued3]", "smoke"):
        assert word in table, (word, table)
