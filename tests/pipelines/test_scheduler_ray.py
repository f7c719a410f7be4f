"""A task's runs fanned out over a Ray cluster: a head and a worker (1 CPU each) started with `ray start` on loopback.

The results equal those of the same runs one after another in this process, bit for bit (step-bounded runs, 1 thread
each); MLflow runs from the workers land in the same kind of store with the same names; a worker killed mid-run is
retried from its last checkpoint and ends where an uninterrupted run ends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.pipelines.conftest import start_loopback_cluster
from tests.pipelines.test_scheduler import strip, toy_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    with start_loopback_cluster(head_cpus=1, worker_cpus=1) as c:
        yield c


def _weights(root: Path, run: str) -> dict:
    return torch.load(root / "toy_counting" / run / "last.pt", weights_only=True)["model"]


def test_a_task_fans_out_over_two_nodes_with_the_results_of_the_sequential_stage(
    cluster, tmp_path, monkeypatch, capsys
):
    from mlflow.tracking import MlflowClient

    from pipelines.train import train

    params = toy_params()  # 2 models x 2 seeds, 40 steps each, 1 thread
    kw = dict(report_root=tmp_path / "rep", tracking=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'seq.db'}")
    sequential = train(params, "toy_counting", out_root=tmp_path / "seq", parallel=1, **kw)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'ray.db'}")
    monkeypatch.chdir(tmp_path)
    fanned = train(
        params,
        "toy_counting",
        out_root=tmp_path / "ray",
        parallel=2,
        address=cluster.address,
        report_root=tmp_path / "rep2",
        tracking=True,
    )
    out = capsys.readouterr().out
    assert "4 run(s), 2 at a time, on the Ray cluster at 127.0.0.1:" in out and "(2 nodes, 2 CPUs, 0 GPUs)" in out
    assert out.count("] done  ") == 8  # 4 of each stage
    assert strip(fanned) == strip(sequential)
    assert all(
        torch.equal(a, b)
        for run in fanned
        for a, b in zip(_weights(tmp_path / "seq", run).values(), _weights(tmp_path / "ray", run).values())
    )
    assert {json.dumps(m["resources"], sort_keys=True) for m in fanned.values()} == {
        json.dumps({"scheduler": "ray", "parallel": 2, "threads": 1, "cpus": 1.0, "gpus": 0.0}, sort_keys=True)
    }
    nodes = {
        re.search(r"\(node (\w+)\)", (tmp_path / "ray" / "toy_counting" / run / "log.txt").read_text()).group(1)
        for run in fanned
    }
    assert nodes == {cluster.head_node[:8], cluster.worker_node[:8]}  # 1 CPU per node: two runs at once use both

    def runs(db: str) -> dict:
        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / db}")
        exp = client.get_experiment_by_name("toy_counting")
        return {
            r.info.run_name: (r.info.status, r.data.metrics["best_val_accuracy"])
            for r in client.search_runs([exp.experiment_id])
        }

    assert runs("ray.db") == runs("seq.db") and len(runs("ray.db")) == 4
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlruns.db").exists()  # nothing in the worker's cwd

    # the evaluate stage's runs go the same way, each in a fresh worker; the test scores are the sequential ones
    from pipelines.evaluate import evaluate

    here = evaluate(
        params, "toy_counting", train_root=tmp_path / "seq", report_root=tmp_path / "e1", tracking=False, parallel=1
    )
    there = evaluate(
        params,
        "toy_counting",
        train_root=tmp_path / "ray",
        report_root=tmp_path / "e2",
        tracking=False,
        parallel=2,
        address=cluster.address,
    )
    scores = lambda results: {run: {k: v for k, v in m.items() if k.startswith("test_")} for run, m in results.items()}
    assert scores(there) == scores(here) and len(there) == 4
    assert {m["resources"]["scheduler"] for m in there.values()} == {"ray"}
    assert sorted(p.name for p in (tmp_path / "e2" / "evaluate" / "toy_counting" / "plots").iterdir()) == sorted(
        p.name for p in (tmp_path / "e1" / "evaluate" / "toy_counting" / "plots").iterdir()
    )


def fan_out_while(params: dict, cluster, tmp_path: Path, watch) -> dict:
    """The task's runs over ``cluster`` (2 at a time, into tmp_path/ray) while ``watch`` runs in a thread beside them
    (a fault to inject); returns the stage's metrics."""
    from pipelines.train import train

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        return train(
            params,
            "toy_counting",
            out_root=tmp_path / "ray",
            parallel=2,
            address=cluster.address,
            report_root=tmp_path / "rep2",
            tracking=False,
        )
    finally:
        watcher.join()


def test_a_worker_killed_mid_run_is_retried_from_its_checkpoint(cluster, tmp_path, capsys):
    from pipelines.train import train

    params = toy_params(max_steps=400, eval_every=40)
    params["tasks"]["toy_counting"]["models"] = ["transformer"]
    kw = dict(report_root=tmp_path / "rep", tracking=False)
    reference = train(params, "toy_counting", out_root=tmp_path / "ref", parallel=1, **kw)

    task_dir = tmp_path / "ray" / "toy_counting"
    killed = {}

    def kill_when_two_evaluations_are_done() -> None:
        history, log = task_dir / ".transformer-seed0.run" / "history.csv", task_dir / ".transformer-seed0.log"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if history.is_file() and len(history.read_text().splitlines()) >= 3 and log.is_file():
                pid = int(re.search(r": pid (\d+) ", log.read_text()).group(1))
                os.kill(pid, signal.SIGKILL)  # the Ray worker training this run, started by this test's cluster
                killed["evaluations"] = len(history.read_text().splitlines()) - 1
                return
            time.sleep(0.01)

    fanned = fan_out_while(params, cluster, tmp_path, kill_when_two_evaluations_are_done)
    assert killed and killed["evaluations"] < 10, "the run ended before its worker could be killed"
    log = (task_dir / "transformer-seed0" / "log.txt").read_text()
    assert log.count(": pid ") == 2 and "resuming after step" in log  # a second attempt, from the checkpoint
    assert re.search(r"done  transformer-seed0  in .*; continued after evaluation \d", capsys.readouterr().out)
    assert strip(fanned) == strip(reference)
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            _weights(tmp_path / "ref", "transformer-seed0").values(),
            _weights(tmp_path / "ray", "transformer-seed0").values(),
        )
    )


def test_a_node_killed_mid_run_loses_no_run(tmp_path, capsys):
    """The whole worker node (its `ray start`, raylet and workers: one process group) killed while a run trains on it:
    Ray reschedules the run on the head, which continues from the run's last checkpoint; every run ends where the
    same runs end one after another in this process (issue 39). A cluster of its own: the node does not come back."""
    from pipelines.train import train

    params = toy_params(max_steps=2000, eval_every=40)  # ~10 s a run: the kill lands mid-run, not after it
    kw = dict(report_root=tmp_path / "rep", tracking=False)
    reference = train(params, "toy_counting", out_root=tmp_path / "ref", parallel=1, **kw)
    task_dir = tmp_path / "ray" / "toy_counting"
    with start_loopback_cluster(head_cpus=1, worker_cpus=1) as cluster:
        killed = {}

        def kill_the_worker_node_mid_run() -> None:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                for log in task_dir.glob(".*.log"):
                    history = task_dir / (log.name.removesuffix(".log") + ".run") / "history.csv"
                    on_worker = f"(node {cluster.worker_node[:8]}" in log.read_text()
                    if on_worker and history.is_file() and len(history.read_text().splitlines()) >= 3:
                        os.killpg(cluster.worker.pid, signal.SIGKILL)  # the node's every process
                        killed["run"] = log.name.removeprefix(".").removesuffix(".log")
                        return
                time.sleep(0.01)

        fanned = fan_out_while(params, cluster, tmp_path, kill_the_worker_node_mid_run)
    assert killed, "no run trained on the worker node long enough to be killed there"
    log = (task_dir / killed["run"] / "log.txt").read_text()
    assert log.count(": pid ") == 2 and "resuming after step" in log, log[-2000:]  # again, from its checkpoint
    assert f"(node {cluster.head_node[:8]}" in log  # the second attempt ran on the head
    assert strip(fanned) == strip(reference) and len(fanned) == len(reference)
    for run in reference:
        assert all(
            torch.equal(a, b)
            for a, b in zip(_weights(tmp_path / "ref", run).values(), _weights(tmp_path / "ray", run).values())
        ), run
