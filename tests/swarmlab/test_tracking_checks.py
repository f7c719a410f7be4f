"""Tracking stores and Ray addresses that cannot work are one line, in seconds, naming the cause and the fix
(swarmlab.tracking.check_tracking_uri, swarmlab.drive.schedule.cluster.check_reachable); a store that fails mid-run
turns tracking off with one warning instead of failing the run (swarmlab.tracking.MlflowTracker).

The servers here are sockets and threads of this process: one that listens and never answers, an HTTP server that
answers 404, a closed port. The CLI side (exit 2, nothing written; a server killed mid-run) is in
tests/pipelines/test_tracking_faults.py.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import socket
import sqlite3
import threading
import time

import pytest

from swarmlab.errors import SwarmlabError
from swarmlab.tracking import MLFLOW_HTTP_DEFAULTS, MlflowTracker, check_tracking_uri

TIMEOUT_S = 1.0  # the checks' wait in these tests (5 s by default)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def silent_port():
    """A port that accepts TCP connections (the kernel completes them into the backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


@contextlib.contextmanager
def http_server(code: int, body: bytes = b"not found"):
    """An HTTP server on loopback answering every GET with ``code``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def refused(uri: str) -> str:
    with pytest.raises(SwarmlabError) as err:
        check_tracking_uri(uri, timeout_s=TIMEOUT_S)
    message = str(err.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------------------------ tracking stores


def test_a_server_that_accepts_and_never_answers_is_one_line_within_the_timeout():
    with silent_port() as port:
        t0 = time.monotonic()
        message = refused(f"http://127.0.0.1:{port}")
        elapsed = time.monotonic() - t0
    assert message.startswith(f"the server at http://127.0.0.1:{port} did not answer GET /health within 1 s")
    assert "SWARMLAB_CONNECT_TIMEOUT_S" in message and "--no-tracking" in message
    assert elapsed < TIMEOUT_S + 2


def test_a_server_that_is_not_mlflow_is_named_by_its_answer():
    with http_server(404) as port:
        message = refused(f"http://127.0.0.1:{port}")
    assert message.startswith(f"the server at http://127.0.0.1:{port} answered 404 to /health: it is not an MLflow")
    with http_server(200, b"OK") as port:  # what an MLflow server answers
        assert check_tracking_uri(f"http://127.0.0.1:{port}", timeout_s=TIMEOUT_S) == f"http://127.0.0.1:{port}"


def test_a_closed_port_is_one_line():
    port = closed_port()
    assert refused(f"http://127.0.0.1:{port}").startswith(
        f"no MLflow server answers at http://127.0.0.1:{port} (connection refused): start one"
    )


@pytest.mark.parametrize(
    "scheme, default", [("postgresql", 5432), ("postgresql+psycopg2", 5432), ("mysql", 3306), ("mssql", 1433)]
)
def test_a_database_server_that_is_not_there_is_one_line_without_its_password(scheme, default):
    port = closed_port()
    message = refused(f"{scheme}://user:secret@127.0.0.1:{port}/mlflow")
    name = scheme.split("+")[0]
    assert message.startswith(f"no {name} server answers at 127.0.0.1:{port} within 1 s (connection refused;")
    assert "secret" not in message and "user:***@" in message
    # no host: a unix socket, left to the driver
    assert check_tracking_uri(f"{scheme}:///mlflow?host=/var/run/db", timeout_s=TIMEOUT_S)


def test_a_sqlite_uri_at_a_file_that_is_not_a_database_is_one_line(tmp_path):
    db = tmp_path / "mlruns.db"
    db.write_text("these are my notes, not a database\n")
    message = refused(f"sqlite:///{db}")
    assert message.startswith(f"tracking store {db} is not a SQLite database (it begins b'these ar'): move it away")
    assert db.read_text() == "these are my notes, not a database\n"  # left as it was
    db.write_bytes(b"")  # an empty file is what sqlite3.connect leaves: MLflow makes a store of it
    assert check_tracking_uri(f"sqlite:///{db}", timeout_s=TIMEOUT_S)


def test_a_read_only_sqlite_store_is_one_line_even_for_root(tmp_path):
    db = tmp_path / "mlruns.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    assert check_tracking_uri(f"sqlite:///{db}", timeout_s=TIMEOUT_S)  # writable: accepted
    before = db.read_bytes()
    db.chmod(0o444)  # the folder stays writable: the file alone is read-only
    try:
        message = refused(f"sqlite:///{db}")
    finally:
        db.chmod(0o644)
    assert message == (
        f"tracking store {db} is read-only: make it writable (chmod u+w), point MLFLOW_TRACKING_URI at another "
        f"file, or run with --no-tracking"
    )
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["mlruns.db"]


def test_a_bad_timeout_setting_is_one_line(monkeypatch):
    from swarmlab.tracking import connect_timeout_s

    assert connect_timeout_s() == 5.0
    monkeypatch.setenv("SWARMLAB_CONNECT_TIMEOUT_S", "0.5")
    assert connect_timeout_s() == 0.5
    monkeypatch.setenv("SWARMLAB_CONNECT_TIMEOUT_S", "soon")
    with pytest.raises(SwarmlabError, match=r"SWARMLAB_CONNECT_TIMEOUT_S='soon' is not a positive number"):
        connect_timeout_s()


# ------------------------------------------------------------------------------------------------ mid-run failure


class DyingClient:
    """An MlflowClient whose store answers until ``die()``, then raises what a dead server raises."""

    def __init__(self):
        self.calls, self.dead = [], False

    def die(self):
        self.dead = True

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if self.dead:
                raise ConnectionError(f"HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries exceeded ({name})")
            self.calls.append(name)

        return call


def test_a_store_that_fails_mid_run_turns_tracking_off_with_one_warning(tmp_path, caplog):
    tracker = MlflowTracker("toy", "m-seed0", uri=f"sqlite:///{tmp_path / 'mlruns.db'}")
    run_id = tracker.run_id
    tracker.log_metrics({"loss": 1.0}, step=1)
    tracker.client = client = DyingClient()
    tracker.log_metrics({"loss": 0.5}, step=2)
    assert client.calls == ["log_batch"]
    client.die()
    with caplog.at_level(logging.WARNING, logger="swarmlab"):
        logging.getLogger("swarmlab").addHandler(caplog.handler)  # the tree does not propagate to the root
        try:
            tracker.log_metrics({"loss": 0.25}, step=3)  # fails: tracking off
            tracker.set_tags({"stopped": "max_steps"})  # nothing more reaches the store
            tracker.log_artifact(tmp_path / "mlruns.db")
            tracker.finish()
        finally:
            logging.getLogger("swarmlab").removeHandler(caplog.handler)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"warning: tracking store sqlite:///{tmp_path / 'mlruns.db'} failed (ConnectionError: HTTPConnectionPool("
        f"host='127.0.0.1', port=5000): Max retries exceeded (log_batch)): MLflow run {run_id} goes on without "
        f"tracking; its results are in its output folder and the MLflow run stays unfinished"
    ]
    assert tracker.run_id == run_id and tracker.lost.startswith("ConnectionError")


def test_a_store_that_fails_while_the_run_opens_gives_a_tracker_that_records_nothing(monkeypatch, caplog):
    import swarmlab.tracking as tracking

    def dead(uri):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(tracking, "open_client", dead)
    tracker = MlflowTracker("toy", "m-seed0", uri="http://127.0.0.1:9")
    assert tracker.run_id is None and tracker.lost == "ConnectionError: connection refused"
    tracker.log_params({"a": 1})  # no error
    tracker.finish()
    resumed = MlflowTracker("toy", "m-seed0", run_id="abc", uri="http://127.0.0.1:9")
    assert resumed.run_id == "abc"  # a resumed run keeps its id


def test_mlflow_http_retries_are_bounded_by_default_and_a_users_values_win(monkeypatch, tmp_path):
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR,
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
        MLFLOW_HTTP_REQUEST_TIMEOUT,
    )

    from swarmlab.tracking import open_client

    for key in MLFLOW_HTTP_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    open_client(f"sqlite:///{tmp_path / 'mlruns.db'}")
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2 and MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == 1
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 60  # the user's


# ------------------------------------------------------------------------------------------------ Ray addresses


@pytest.fixture
def ray_tmp(tmp_path, monkeypatch):
    """Ray's temp folder (where `ray start` records its cluster) moved into tmp_path: the real /tmp/ray is not read."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return tmp_path / "ray"


def ray_refused(address: str) -> str:
    from swarmlab.drive.schedule.cluster import check_reachable

    with pytest.raises(SwarmlabError) as err:
        check_reachable(address, timeout_s=TIMEOUT_S)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_ray_auto_with_no_cluster_on_this_machine_is_one_line(ray_tmp):
    from swarmlab.drive.schedule.cluster import ray_address_file

    assert ray_address_file() == ray_tmp / "ray_current_cluster"
    assert ray_refused("auto") == (
        f"Ray address auto (--address or RAY_ADDRESS) but no Ray cluster runs on this machine (no "
        f"{ray_tmp / 'ray_current_cluster'}): start one with `ray start --head`, or drop --address / unset "
        f"RAY_ADDRESS to run a local Ray"
    )


def test_ray_auto_naming_a_stale_cluster_is_one_line_naming_the_file(ray_tmp):
    ray_tmp.mkdir()
    port = closed_port()
    (ray_tmp / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n")
    file = ray_tmp / "ray_current_cluster"
    assert ray_refused("auto") == (
        f"Ray address auto names the cluster at 127.0.0.1:{port} (from {file}), which does not answer (connection "
        f"refused): the file is left over from an earlier `ray start`; run `ray stop` or delete {file}, or drop "
        f"--address / unset RAY_ADDRESS to run a local Ray"
    )


def test_a_ray_address_that_accepts_and_never_answers_is_one_line_within_the_timeout(ray_tmp):
    with silent_port() as port:
        t0 = time.monotonic()
        message = ray_refused(f"127.0.0.1:{port}")
        elapsed = time.monotonic() - t0
    assert message.startswith(
        f"cannot reach a Ray cluster at 127.0.0.1:{port} (it accepts connections but does not answer within 1 s): "
    )
    assert elapsed < TIMEOUT_S + 2
    with http_server(404) as port:  # a server, but not Ray's
        assert "(it answers, but not as a Ray GCS (gRPC))" in ray_refused(f"127.0.0.1:{port}")


def test_a_local_ray_is_always_a_new_one_and_auto_joins_the_recorded_cluster(ray_tmp, monkeypatch):
    import ray

    from swarmlab.drive.schedule import cluster

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    ray_tmp.mkdir()
    (ray_tmp / "ray_current_cluster").write_text("127.0.0.1:6379")  # an earlier `ray start`'s: not joined
    assert cluster.connect_ray(None, num_cpus=2)
    assert calls[-1]["address"] == "local" and calls[-1]["num_cpus"] == 2
    monkeypatch.setattr(cluster, "_gcs_answer", lambda host, port, timeout_s: None)  # as if it answered
    assert cluster.connect_ray("auto")
    assert calls[-1]["address"] == "auto"  # ray.init reads the same file (and its token auth, as `ray start` set)
