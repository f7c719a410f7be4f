"""The MLflow UI in a real browser: our run, one of its metrics and a paper baseline are visible.

A store with a smoke training run (toy_counting, seconds) and the papers' baselines, served by the light MLflow
server on 127.0.0.1; headless Chromium (Debian's `chromium`, which .ci/run installs) opens the task's runs page,
the `paper-baselines` runs page and the run-comparison page of our run beside a paper's. The page text is read
with --dump-dom; a screenshot of the comparison is saved as the test's artifact (its path is printed; set
SWARMLAB_ARTIFACTS to copy it there). Without Chromium the test fails, it does not skip.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from swarmlab.mlflow_ui import CHROMIUM_FLAGS, mlflow_server
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("SWARMLAB_CHROMIUM", "/usr/bin/chromium")
FLAGS = [*CHROMIUM_FLAGS, "--virtual-time-budget=20000"]


def chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if not path:
        pytest.fail(
            f"Chromium is not installed ({CHROMIUM} missing): install Debian's package "
            f"(`apt-get install -y chromium`, which .ci/run does) or set SWARMLAB_CHROMIUM to a chromium binary",
            pytrace=False,
        )
    return path


def page_text(dom: str) -> str:
    dom = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)))


def browse(url: str, tmp: Path, name: str, *, screenshot: bool = False, expect: tuple[str, ...] = ()) -> str:
    """The page's text after its scripts ran (a fresh profile each time: the UI keeps view state in localStorage).

    A page fills in by requests of its own after it loads, and on a busy machine the DOM can be read before they
    answer: with ``expect``, a page missing any of those words is read again (3 tries), and the last read returned."""
    for attempt in range(3):
        profile = tmp / f"chromium-{name}-{attempt}"
        cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1600"]
        proc = subprocess.run([*cmd, "--dump-dom", url], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        if all(word in page_text(proc.stdout) for word in expect):
            break
    if screenshot:
        shot = tmp / f"{name}.png"
        subprocess.run([*cmd, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120, check=True)
        assert shot.is_file() and shot.stat().st_size > 10_000
        print(f"\nscreenshot of {url}: {shot}")
        if os.environ.get("SWARMLAB_ARTIFACTS"):
            Path(os.environ["SWARMLAB_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
            print(f"copied to {shutil.copy(shot, os.environ['SWARMLAB_ARTIFACTS'])}")
    return page_text(proc.stdout)


@pytest.fixture
def store(tmp_path):
    """A sqlite store holding a toy_counting training run and the papers' baselines."""
    db = tmp_path / "mlruns.db"
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{db}",
        "SWARMLAB_WORKDIR": str(tmp_path / "work"),
        "SWARMLAB_PROGRESS": "0",
    }
    for cmd in (["pipelines.train", "--task", "toy_counting", "--profile", "smoke"], ["pipelines.paper_baselines"]):
        proc = subprocess.run(
            [sys.executable, "-m", *cmd], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return db


@pytest.fixture
def server(store, tmp_path):
    """The light MLflow server (one worker, no job runner) on a free port of 127.0.0.1."""
    with mlflow_server(store, tmp_path / "server.log") as base:
        yield base


def test_the_mlflow_ui_shows_our_run_a_metric_and_a_paper_baseline(server, store, tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    ours_exp = client.get_experiment_by_name("toy_counting")
    papers_exp = client.get_experiment_by_name("paper-baselines")
    run = client.search_runs([ours_exp.experiment_id])[0]
    paper = client.search_runs([papers_exp.experiment_id], "tags.baseline_key = 'seed000/table2/swarmformer-small'")[0]
    assert run.data.tags["run"] == "transformer-seed0" and "best_val_accuracy" in run.data.metrics
    assert run.info.run_name.startswith("transformer-seed0 | ")  # | <profile> [| exp <DVC experiment>] [| overrides]

    runs_page = browse(
        f"{server}/#/experiments/{ours_exp.experiment_id}/runs", tmp_path, "runs", expect=("transformer-seed0",)
    )
    assert "Training runs" in runs_page, f"not the model-training view: {runs_page[:800]}"
    assert "transformer-seed0" in runs_page

    # the landing link docs/tracking.md gives: a fresh browser opens MLflow 3.17 in its GenAI mode (the experiment's
    # Overview of traces) whatever the experiment's tags; `?workflowType=machine_learning` opens its runs table
    landing = browse(
        f"{server}/#/experiments/{ours_exp.experiment_id}?workflowType=machine_learning",
        tmp_path,
        "land",
        expect=("matching run", "transformer-seed0"),
    )
    assert "matching run" in landing and "transformer-seed0" in landing, f"not the runs table: {landing[:800]}"
    assert "Model registry" in landing and "Sessions" not in landing, f"not the Model training mode: {landing[:800]}"

    papers_page = browse(
        f"{server}/#/experiments/{papers_exp.experiment_id}/runs", tmp_path, "papers", expect=("51 matching runs",)
    )
    assert "SwarmFormer-Small | imdb [seed000 Table 2]" in papers_page and "51 matching runs" in papers_page

    query = urllib.parse.urlencode(
        {
            "runs": json.dumps([run.info.run_id, paper.info.run_id]),
            "experiments": json.dumps([ours_exp.experiment_id, papers_exp.experiment_id]),
        }
    )
    compare = browse(
        f"{server}/#/compare-runs?{query}",
        tmp_path,
        "compare",
        screenshot=True,
        expect=("best_val_accuracy", "4300000"),
    )
    assert "transformer-seed0" in compare and "SwarmFormer-Small | imdb [seed000 Table 2]" in compare
    # the Metrics table renders its first 17 rows, alphabetically; a training run's MLflow system metrics
    # (`system/*`, logged once the run has trained 5 s) fill rows before `test_*`, so the paper's row read here is
    # its `num_params` (4.3M; ours is a param) beside our `best_val_accuracy`: one page, a metric of each run
    assert "best_val_accuracy" in compare and "num_params" in compare and "4300000" in compare
    assert "Legg & Sturmanis" in compare  # the baseline's citation tag
