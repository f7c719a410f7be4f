"""Serve the MLflow UI on this project's store: its artifacts re-rooted beside it first, then the light MLflow server.

    swarmlab ui                          # mlruns.db at the repo root (or $MLFLOW_TRACKING_URI's sqlite file), port 5000
    swarmlab ui --port 5001 --store /elsewhere/mlruns.db
    swarmlab ui --reroot-only            # re-root a moved store's artifacts; serve nothing

MLflow 3.17 stores each experiment's artifact location as an absolute ``file://`` URI (a relative one is made
absolute when the experiment is created), so a store moved or copied with its repository would still point at the
old folder: the UI would show no artifacts, and new runs would write into the other checkout. ``swarmlab ui``
re-roots the experiments this project created (``<store folder>/mlartifacts/<experiment>``) to the store's own
folder before serving (``swarmlab.tracking.reroot_artifacts``, which every stage's tracker also runs when it opens
the store). Also here: the server and headless Chromium's flags that tests/e2e/test_mlflow_browser.py and
scripts/mlflow_screenshots.py use.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from swarmlab.errors import SwarmlabError, cli
from swarmlab.tracking import reroot_artifacts

# headless, no sandbox (root in a container), nothing fetched but the page; each caller adds its own window size and
# virtual-time budget (how long the page's scripts may run before the DOM is read or the screenshot taken)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(db: Path, host: str, port: int) -> tuple[list[str], dict]:
    """The light MLflow server on sqlite store ``db``: one worker, no job runner (docs/tracking.md); argv and env."""
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", host, "--port", str(port), "--workers", "1"]
    return [*cmd, "--backend-store-uri", f"sqlite:///{db}"], {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }


@contextlib.contextmanager
def mlflow_server(db: Path, log: Path, timeout_s: float = 120):
    """The light MLflow server on sqlite store ``db``, on a free port of 127.0.0.1, its output in ``log``; yields its
    base URL once ``/health`` answers, and stops it (its process group) on exit."""
    port = free_port()
    cmd, env = server_command(db, "127.0.0.1", port)
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None:
                    raise SwarmlabError(f"the MLflow server exited: {Path(log).read_text()[-2000:]}")
                if time.monotonic() >= deadline:
                    raise SwarmlabError(f"the MLflow server did not answer /health within {timeout_s:g} s")
                time.sleep(0.5)
            yield base
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its worker: the process group it was started in
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def experiment_links(db: Path, base: str) -> list[str]:
    """``<name>: <link to its runs>`` for each active experiment with a run, the training view forced (MLflow 3.17
    opens a fresh browser in its GenAI view otherwise)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT e.experiment_id, e.name FROM experiments e WHERE e.lifecycle_stage = 'active' AND EXISTS "
            "(SELECT 1 FROM runs r WHERE r.experiment_id = e.experiment_id) ORDER BY e.experiment_id"
        ).fetchall()
    finally:
        conn.close()
    return [f"{name}: {base}/#/experiments/{eid}?workflowType=machine_learning" for eid, name in rows]


def store_file(store: str | None) -> Path:
    """The sqlite file to serve: ``--store``, else the tracking URI's (``$MLFLOW_TRACKING_URI`` or the repo root's
    mlruns.db); one line when it is no sqlite file that exists."""
    from swarmlab.paths import tracking_uri
    from swarmlab.tracking import check_tracking_uri, shown, sqlite_path

    if store is None:
        uri = tracking_uri()
        if sqlite_path(uri) is None:
            raise SwarmlabError(
                f"MLFLOW_TRACKING_URI={shown(uri)} is no sqlite store: its server is the UI (open it), or pass "
                f"--store <path>.db"
            )
        db = sqlite_path(uri)
    else:
        db = Path(store)
    db = db.expanduser().resolve()
    if not db.is_file():
        raise SwarmlabError(f"no MLflow store at {db}: run a stage first (it creates it), or pass --store <path>.db")
    check_tracking_uri(f"sqlite:///{db}")  # a SQLite file, writable
    return db


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


@cli
def main(argv: list[str] | None = None) -> int:
    first = __doc__.strip().split("\n\n")[0]  # the description: the docstring's first paragraph, whole
    description = textwrap.fill(" ".join(first.split()), width=100)
    examples = "\n".join(line[2:] for line in __doc__.splitlines() if line.startswith("    swarmlab "))
    parser = argparse.ArgumentParser(
        prog="swarmlab ui",
        description=description,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", default=None, help="the sqlite store (default: $MLFLOW_TRACKING_URI or mlruns.db)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=port_number, default=5000, help="port (default: 5000)")
    parser.add_argument("--reroot-only", action="store_true", help="re-root the store's artifacts; serve nothing")
    args = parser.parse_args(argv)
    db = store_file(args.store)
    if not args.reroot_only:
        with socket.socket() as s:
            try:
                s.bind((args.host, args.port))
            except OSError as exc:
                raise SwarmlabError(
                    f"cannot serve on {args.host}:{args.port} ({os.strerror(exc.errno).lower()}): pick another --port"
                ) from None
    moved = reroot_artifacts(db)
    for line in moved:
        print(f"re-rooted {line}", flush=True)
    if args.reroot_only:
        if not moved:
            print(f"{db}: every experiment's artifacts are already beside it", flush=True)
        return 0
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    base = f"http://{shown_host}:{args.port}"
    print(f"MLflow UI of {db} at {base} (Ctrl-C stops it); each experiment's runs:", flush=True)
    for line in experiment_links(db, base):
        print(f"  {line}", flush=True)
    cmd, env = server_command(db, args.host, args.port)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:  # the server, in our process group, got the same Ctrl-C
        return 0


if __name__ == "__main__":
    sys.exit(main())
