"""A sweep on a Ray cluster: a head and a worker started with `ray start` on loopback, joined with --address.

The head offers no CPUs, so trials can only run on the worker. The test stops exactly the processes it
started (`ray start --block` exits with its node's processes) instead of `ray stop`, which would stop
every Ray process of this user on the machine.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys

import pytest
from ray.tune import Callback

from swarmlab.paths import REPO_ROOT

from tests.pipelines.conftest import free_port, start_loopback_cluster, write_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loopback_cluster():
    """(address, env, worker node id) of a head (0 CPUs) and one worker (2 CPUs) on 127.0.0.1."""
    with start_loopback_cluster(head_cpus=0, worker_cpus=2) as cluster:
        yield cluster.address, cluster.env, cluster.worker_node


def test_sweep_runs_on_a_cluster_joined_by_address(loopback_cluster, tiny_data, tmp_path):
    from mlflow.tracking import MlflowClient

    address, env, worker_node = loopback_cluster
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    params = write_params(tmp_path, num_samples=2, max_concurrent=2, max_epochs=2, grace_period=2)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.sweep",
            "--params",
            str(params),
            "--profile",
            "smoke",
            "--task",
            "imdb",
            "--address",
            address,
            "--data-dir",
            str(tiny_data),
            "--out-dir",
            str(tmp_path / "out"),
            "--report-dir",
            str(tmp_path / "rep"),
        ],
        cwd=tmp_path,
        env={**env, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "rep" / "imdb" / "summary.csv")))
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}
    assert json.loads((tmp_path / "rep" / "imdb" / "best_params.json").read_text())["best_model"] == "swarmformer_small"

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("imdb-sweep")
    trials = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(trials) == 2
    assert {r.data.tags["node_id"] for r in trials} == {worker_node}  # the head has no CPUs: all ran on the worker


def test_unreachable_cluster_is_one_line_error(tiny_data, tmp_path):
    params = write_params(tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.sweep",
            "--params",
            str(params),
            "--profile",
            "smoke",
            "--address",
            f"127.0.0.1:{free_port()}",
            "--data-dir",
            str(tiny_data),
            "--out-dir",
            str(tmp_path / "out"),
            "--report-dir",
            str(tmp_path / "rep"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.strip().startswith("error: cannot reach a Ray cluster at 127.0.0.1:")
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` was started, at any depth, by ``ancestor`` (the node's `ray start`: its raylet starts the
    workers that run the trials), read from /proc."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the field after the state: the parent's pid
        except (OSError, ValueError, IndexError):
            return False
    return False


class KillNodeAfterATrialFinished(Callback):
    """Kills the worker node (its `ray start`, raylet and workers: one process group) once a trial has finished and
    another reports from a process on that node, and records what the finished trials had reached by then."""

    def __init__(self, node_group: int, last: int):
        self.node_group, self.last = node_group, last
        self.finished: dict[str, float] = {}  # trial id -> its best validation score when it finished
        self.at_kill: dict[str, float] | None = None
        self.killed_trial = None

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.finished[trial.trial_id] = trial.last_result["best_val_accuracy"]

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.at_kill is not None or not self.finished or result.get("evaluation", 0) >= self.last:
            return  # only a trial in mid-course: one reporting its last evaluation is as good as finished
        if descends_from(result["pid"], self.node_group):
            self.at_kill, self.killed_trial = dict(self.finished), trial.trial_id
            os.killpg(self.node_group, signal.SIGKILL)


def test_a_node_killed_mid_sweep_loses_no_finished_trial(tiny_data, tmp_path, monkeypatch):
    """#37 item 4: a sweep over a head and a worker (a CPU each), the worker node killed while one of its trials runs
    and after another trial finished: the sweep ends, every trial finished (the cut one again, on the head, from its
    checkpoint), and the trials finished before the kill keep what they reached."""
    from pipelines.sweep import sweep
    from tests.pipelines.conftest import start_loopback_cluster, tiny_params

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlruns.db'}")
    # max_failures 4: a full CI run on 1c97a65 (beside a claims grid) saw the cut trial logged "failed ... retry 1/2
    # from its last checkpoint" and then, in the same millisecond, "error" (a retry placed before Ray had marked the
    # node dead fails at once, it seems: not proven); retries are what this test gives the cut trial, so it gets
    # room for that. Since 2026-11-30 such a trial is an error row, not a TypeError that lost the sweep's results.
    params = tiny_params(num_samples=4, max_concurrent=2, max_epochs=8, grace_period=8, max_failures=4)
    with start_loopback_cluster(head_cpus=1, worker_cpus=1) as cluster:
        killer = KillNodeAfterATrialFinished(cluster.worker.pid, last=8)
        best = sweep(
            params,
            options={"data_dir": str(tiny_data)},
            out_root=tmp_path / "out",
            report_root=tmp_path / "rep",
            address=cluster.address,
            callbacks=[killer],
        )
    assert killer.at_kill, "no trial ran on the worker node after one had finished"
    entry = best["models"]["swarmformer_small"]
    assert entry["trials"] == 4 and entry["trials_failed"] == 0
    rows = {r["trial"]: r for r in csv.DictReader(open(tmp_path / "rep" / "imdb" / "summary.csv"))}
    assert len(rows) == 4 and {r["status"] for r in rows.values()} == {"ok"}, rows
    assert killer.killed_trial in killer.finished  # the cut trial finished too, after the kill
    for trial, score in killer.at_kill.items():  # a trial finished before the kill is kept as it was
        assert killer.finished[trial] == score and float(rows[trial]["best_val_accuracy"]) == pytest.approx(score)
