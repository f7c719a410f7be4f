"""The MLflow UI, served and read in a browser: the light MLflow server on a free port of 127.0.0.1, and headless
Chromium's flags. One home for what tests/e2e/test_mlflow_browser.py and scripts/mlflow_screenshots.py both do."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from swarmlab.errors import SwarmlabError

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


@contextlib.contextmanager
def mlflow_server(db: Path, log: Path, timeout_s: float = 120):
    """The light MLflow server (one worker, no job runner) on sqlite store ``db``, on a free port of 127.0.0.1, its
    output in ``log``; yields its base URL once ``/health`` answers, and stops it (its process group) on exit."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [*cmd, "--backend-store-uri", f"sqlite:///{db}"],
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
