"""Tracking and Ray never hang or crash a training run, seen from the CLI as a user runs it.

A store or a Ray address that cannot work is `error: <one line>`, exit 2, before anything is written. A tracking
server that dies mid-run costs the run its tracking, not its results: it finishes (exit 0) with its outputs, and one
warning line says so. The server here is a fake MLflow REST API in a thread of this process (a real `mlflow server`
takes about 9 s to start), shut down once the run has logged its first metrics.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.swarmlab.test_tracking_checks import closed_port, http_server, silent_port

pytestmark = pytest.mark.slow  # a training process per case


def write_params(path: Path, runs: int = 1) -> Path:
    """Toy counting, one run (transformer, seed 0) or four (2 models x 2 seeds: enough for Ray), 160 steps each (an
    evaluation every 40), one thread."""
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["profile"] = "t"
    section = raw["defaults"]["tasks"]["toy_counting"]
    if runs == 4:
        section.update(models=["transformer", "linear_transformer"], seeds=[0, 1])
    else:
        section.update(models=["transformer"], seeds=[0])
    raw["profiles"] = {
        "t": {
            "tasks": {"toy_counting": {"train": {"max_steps": 160, "eval_every": 40}}},
            "train": {"device": "cpu", "num_threads": 1},
        }
    }
    raw.pop("train", None)
    raw["schedule"] = {"parallel": 1}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def train(workdir: Path, params: Path, env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "SWARMLAB_WORKDIR": str(workdir), "OMP_NUM_THREADS": "1", "SWARMLAB_PROGRESS": "0"}
    full.pop("RAY_ADDRESS", None)
    full.update(env)
    cmd = [sys.executable, "-m", "pipelines.train", "--params", str(params), "--task", "toy_counting", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=full, capture_output=True, text=True, timeout=timeout)


def one_error_line(run: subprocess.CompletedProcess, workdir: Path, start: str) -> None:
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.startswith(f"error: {start}"), run.stderr[-2000:]
    assert len(run.stderr.strip().splitlines()) == 1 and run.stdout == "", run.stderr
    assert not workdir.exists()  # nothing written


def _sqlite_garbage(tmp: Path) -> tuple[dict, str]:
    (tmp / "notes.db").write_text("not a database")
    return {
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'notes.db'}"
    }, f"tracking store {tmp / 'notes.db'} is not a SQLite"


def _sqlite_read_only(tmp: Path) -> tuple[dict, str]:
    import sqlite3

    db = tmp / "archive.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE t (x)")
    db.chmod(0o444)
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{db}"}, f"tracking store {db} is read-only: make it writable"


def _postgres_down(tmp: Path) -> tuple[dict, str]:
    port = closed_port()
    return {
        "MLFLOW_TRACKING_URI": f"postgresql://u:pw@127.0.0.1:{port}/m"
    }, f"no postgresql server answers at 127.0.0.1:{port}"


def _ray_auto_without_cluster(tmp: Path) -> tuple[dict, str]:
    return {"RAY_ADDRESS": "auto", "RAY_TMPDIR": str(tmp)}, "Ray address auto (--address or RAY_ADDRESS) but no Ray"


def _ray_auto_stale(tmp: Path) -> tuple[dict, str]:
    (tmp / "ray").mkdir()
    (tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{closed_port()}")
    return {"RAY_ADDRESS": "auto", "RAY_TMPDIR": str(tmp)}, "Ray address auto names the cluster at 127.0.0.1:"


CASES = {
    "sqlite-garbage": _sqlite_garbage,
    "sqlite-read-only": _sqlite_read_only,
    "postgres-down": _postgres_down,
    "ray-auto-no-cluster": _ray_auto_without_cluster,
    "ray-auto-stale-file": _ray_auto_stale,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_store_or_ray_address_that_cannot_work_is_one_line_before_anything_is_written(case, tmp_path):
    env, start = CASES[case](tmp_path)
    ray = case.startswith("ray")
    run = train(
        tmp_path / "w",
        write_params(tmp_path / "params.yaml", runs=4 if ray else 1),
        {"SWARMLAB_CONNECT_TIMEOUT_S": "2", **env},
        *(["--parallel", "2"] if ray else []),
    )
    one_error_line(run, tmp_path / "w", start)


def test_a_silent_server_or_ray_address_is_one_line_within_the_timeout(tmp_path):
    params = write_params(tmp_path / "params.yaml", runs=4)
    with silent_port() as port, http_server(404) as not_mlflow:
        env = {"SWARMLAB_CONNECT_TIMEOUT_S": "2"}
        one_error_line(
            train(tmp_path / "w", params, {**env, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}),
            tmp_path / "w",
            f"the server at http://127.0.0.1:{port} did not answer GET /health within 2 s",
        )
        one_error_line(
            train(tmp_path / "w", params, {**env, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{not_mlflow}"}),
            tmp_path / "w",
            f"the server at http://127.0.0.1:{not_mlflow} answered 404 to /health: it is not an MLflow tracking server",
        )
        one_error_line(
            train(tmp_path / "w", params, {**env, "RAY_ADDRESS": f"127.0.0.1:{port}"}, "--parallel", "2"),
            tmp_path / "w",
            f"cannot reach a Ray cluster at 127.0.0.1:{port} (it accepts connections but does not answer within 2 s)",
        )


# ------------------------------------------------------------------------------------------------ server dies mid-run


class FakeMlflow(http.server.ThreadingHTTPServer):
    """The few MLflow REST calls a training run makes, answered from memory; ``metrics_logged`` is set on the first
    batch of metrics. Artifacts go to a local folder (the experiment's artifact location)."""

    def __init__(self, artifacts: Path):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.artifacts = artifacts.resolve().as_uri()
        self.metrics_logged = threading.Event()
        self.run_id = "0123456789abcdef0123456789abcdef"
        self.experiment = None

    def run(self) -> dict:
        return {
            "info": {
                "run_id": self.run_id,
                "run_uuid": self.run_id,
                "experiment_id": "1",
                "run_name": "r",
                "status": "RUNNING",
                "start_time": 1,
                "artifact_uri": f"{self.artifacts}/{self.run_id}/artifacts",
                "lifecycle_stage": "active",
            },
            "data": {},
        }


class FakeHandler(http.server.BaseHTTPRequestHandler):
    server: FakeMlflow

    def log_message(self, *args):  # quiet
        pass

    def _answer(self, code: int, payload: dict | str) -> None:
        body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urlparse(self.path).path
        if path == "/health":
            return self._answer(200, "OK")
        if path.endswith("/experiments/get-by-name"):
            if self.server.experiment is None:
                return self._answer(404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no experiment"})
            return self._answer(200, {"experiment": self.server.experiment})
        if path.endswith("/runs/get"):
            return self._answer(200, {"run": self.server.run()})
        return self._answer(200, {})

    def do_POST(self):
        path = urlparse(self.path).path
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if path.endswith("/experiments/create"):
            self.server.experiment = {
                "experiment_id": "1",
                "name": payload["name"],
                "artifact_location": self.server.artifacts,
                "lifecycle_stage": "active",
            }
            return self._answer(200, {"experiment_id": "1"})
        if path.endswith("/runs/search"):
            return self._answer(200, {"runs": []})
        if path.endswith("/runs/create"):
            return self._answer(200, {"run": self.server.run()})
        self._answer(200, {})
        if path.endswith("/runs/log-batch") and payload.get("metrics"):
            self.server.metrics_logged.set()


def test_a_tracking_server_that_dies_mid_run_costs_the_run_its_tracking_not_its_results(tmp_path):
    server = FakeMlflow(tmp_path / "artifacts")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    params = write_params(tmp_path / "params.yaml", runs=1)
    env = {**os.environ, "SWARMLAB_WORKDIR": str(tmp_path / "w"), "OMP_NUM_THREADS": "1", "SWARMLAB_PROGRESS": "0"}
    env["MLFLOW_TRACKING_URI"] = uri
    cmd = [sys.executable, "-m", "pipelines.train", "--params", str(params), "--task", "toy_counting"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not server.metrics_logged.wait(0.1):
            assert proc.poll() is None, f"the run ended before it logged metrics: {proc.communicate()[1][-3000:]}"
    finally:
        server.shutdown()  # the server dies: later calls find the port closed
        server.server_close()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    warnings = [line for line in err.splitlines() if line.startswith("warning: tracking store")]
    assert len(warnings) == 1, err[-3000:]
    assert warnings[0].startswith(f"warning: tracking store {uri} failed (")
    assert warnings[0].endswith(
        f"MLflow run {server.run_id} goes on without tracking; its results are in its output folder and the MLflow "
        f"run stays unfinished"
    )
    run_dir = tmp_path / "w" / "outputs" / "train" / "toy_counting" / "transformer-seed0"
    assert (run_dir / "summary.json").is_file() and (run_dir / "best.pt").is_file()
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == server.run_id
    metrics = json.loads((tmp_path / "w" / "reports" / "train" / "toy_counting" / "metrics.json").read_text())
    assert list(metrics) == ["transformer-seed0"] and metrics["transformer-seed0"]["steps"] == 160
