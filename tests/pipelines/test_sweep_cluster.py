"""A sweep on a Ray cluster: a head and a worker started with `ray start` on loopback, joined with --address.

The head offers no CPUs, so trials can only run on the worker. The test stops exactly the processes it
started (`ray start --block` exits with its node's processes) instead of `ray stop`, which would stop
every Ray process of this user on the machine.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.common.paths import REPO_ROOT

from conftest import free_port, short_tmpdir, write_params

pytestmark = pytest.mark.slow
RAY = str(Path(sys.executable).with_name("ray"))


def _node_ports() -> list[str]:
    """Explicit free ports for one node, so that it cannot clash with another Ray on this machine."""
    ports = []
    for flag in ("--node-manager-port", "--object-manager-port", "--metrics-export-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port"):
        ports += [flag, str(free_port())]
    return ports


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # `ray start --block` then stops the processes of its node
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture(scope="module")
def loopback_cluster():
    """(address, env) of a head (0 CPUs) and one worker (2 CPUs) on 127.0.0.1; stopped even if a test fails."""
    import ray

    temp_dir = short_tmpdir("rc")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--block", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--disable-usage-stats"]
    head = worker = None
    logs = [open(Path(temp_dir) / f"{name}.log", "w") for name in ("head", "worker")]
    try:
        head = subprocess.Popen([RAY, "start", "--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
                                 *common, *_node_ports()], env=env, stdout=logs[0], stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            assert head.poll() is None, (Path(temp_dir) / "head.log").read_text()[-2000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the head did not start"
                time.sleep(0.2)
        worker = subprocess.Popen([RAY, "start", f"--address={address}", "--num-cpus=2", *common, *_node_ports()],
                                  env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True)
        os.environ["RAY_AUTH_MODE"] = "disabled"
        ray.init(address=address, log_to_driver=False)  # wait until the worker has joined
        try:
            while sum(n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]) < 2:
                assert worker.poll() is None and time.monotonic() < deadline, "the worker did not join"
                time.sleep(0.2)
            worker_node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU"))
        finally:
            ray.shutdown()
        yield address, env, worker_node
    finally:
        _stop(worker)
        _stop(head)
        for f in logs:
            f.close()
        leftovers = subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split()
        for pid in map(int, leftovers):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not leftovers, f"Ray processes survived the cluster's stop: {leftovers}"


def test_sweep_runs_on_a_cluster_joined_by_address(loopback_cluster, tiny_data, tmp_path):
    from mlflow.tracking import MlflowClient

    address, env, worker_node = loopback_cluster
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    params = write_params(tmp_path, num_samples=2, max_concurrent=2, max_epochs=2, grace_period=2)
    run = subprocess.run([sys.executable, "-m", "pipelines.sweep", "--params", str(params), "--profile", "smoke",
                          "--task", "imdb", "--address", address, "--data-dir", str(tiny_data),
                          "--out-dir", str(tmp_path / "out"), "--report-dir", str(tmp_path / "rep")],
                         cwd=tmp_path, env={**env, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(REPO_ROOT)},
                         capture_output=True, text=True, timeout=300)
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
    run = subprocess.run([sys.executable, "-m", "pipelines.sweep", "--params", str(params), "--profile", "smoke",
                          "--address", f"127.0.0.1:{free_port()}", "--data-dir", str(tiny_data),
                          "--out-dir", str(tmp_path / "out"), "--report-dir", str(tmp_path / "rep")],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().startswith("error: cannot reach a Ray cluster at 127.0.0.1:")
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
