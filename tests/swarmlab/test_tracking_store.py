"""Processes that open a new sqlite tracking store at the same moment (two claims pieces or grids started together)
must not both migrate it: the second waits for the first (swarmlab.tracking.store_lock)."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from swarmlab.tracking import MlflowTracker, open_client, user

PROCESSES = 4


def _open(uri: str, barrier, errors, k: int) -> None:
    try:
        barrier.wait(timeout=60)  # all at once, as two pieces started together
        tracker = MlflowTracker("race", f"run{k}", uri=uri)
        tracker.log_metrics({"x": float(k)}, step=0)
        tracker.finish()
    except BaseException as exc:  # reported to the parent: a child's traceback alone would not fail the test
        errors.put(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def test_processes_opening_a_new_sqlite_store_together_all_succeed(tmp_path):
    import mlflow  # noqa: F401  (imported before the fork: the children start at the same moment)

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    ctx = mp.get_context("fork")
    barrier, errors = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(uri, barrier, errors, k)) for k in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert not failures, failures
    assert all(p.exitcode == 0 for p in procs)
    client = open_client(uri)
    exp = client.get_experiment_by_name("race")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"run{k}" for k in range(PROCESSES)]
    assert (tmp_path / "mlruns.db.lock").is_file()  # the lock lies beside the store


def test_sqlite_uris_parse_to_their_file_and_workers_get_an_absolute_one(tmp_path, monkeypatch):
    from pathlib import Path

    from swarmlab.drive.schedule.cluster import absolute_tracking_uri
    from swarmlab.tracking import sqlite_path

    assert sqlite_path("sqlite:///runs/m.db") == Path("runs/m.db")
    assert sqlite_path("sqlite:////abs/m.db") == Path("/abs/m.db")
    assert sqlite_path("http://127.0.0.1:5000") is None and sqlite_path(None) is None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///runs/m.db")
    assert absolute_tracking_uri() == f"sqlite:///{tmp_path.resolve() / 'runs' / 'm.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////abs/m.db")
    assert absolute_tracking_uri() == "sqlite:////abs/m.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert absolute_tracking_uri() == "http://127.0.0.1:5000"


def test_runs_carry_mlflows_own_source_tags(tmp_path):
    """MLflow's Source and Version columns read mlflow.source.*: set from our own git_commit and stage tags (#38)."""
    from mlflow.tracking import MlflowClient

    from swarmlab.tracking import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracker = MlflowTracker("toy", "m-seed0", uri=uri, tags={"git_commit": "abc123", "stage": "sweep-trial"})
    tracker.set_tags({"git_commit": "def456"})
    tags = MlflowClient(uri).get_run(tracker.run_id).data.tags
    assert tags["mlflow.source.git.commit"] == "def456" and tags["mlflow.source.name"] == "pipelines/sweep.py"
    assert tags["mlflow.user"] == user() != ""  # the runs table's "Created by", as MLflow's fluent API fills it
    untracked = MlflowTracker("toy", "m-seed1", uri=uri, tags={"git_commit": "unknown"})
    assert "mlflow.source.git.commit" not in MlflowClient(uri).get_run(untracked.run_id).data.tags


def test_a_training_run_gets_mlflows_system_metrics(tmp_path, monkeypatch):
    """The System metrics tab of a run is filled (#38 item 3): the tracker runs MLflow's monitor until it finishes."""
    from mlflow.tracking import MlflowClient

    import swarmlab.tracking as tracking

    monkeypatch.setattr(tracking, "SYSTEM_METRICS_EVERY_S", 0.2)
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    watched = MlflowTracker("toy", "m-seed0", uri=uri, system_metrics=True)
    plain = MlflowTracker("toy", "m-seed1", uri=uri)
    time.sleep(1.0)
    watched.finish()
    plain.finish()
    assert watched.monitor is None  # stopped, its last samples written
    metrics = MlflowClient(uri).get_run(watched.run_id).data.metrics
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= set(metrics), sorted(
        metrics
    )
    assert not any(k.startswith("system/") for k in MlflowClient(uri).get_run(plain.run_id).data.metrics)


def test_system_metrics_follow_mlflows_own_switch(tmp_path, monkeypatch):
    """MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false turns a training run's system metrics off; a value MLflow would not
    read is the store check's one line, before any output is touched."""
    from swarmlab.errors import SwarmlabError
    from swarmlab.tracking import check_tracking_uri

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    off = MlflowTracker("toy", "m-seed0", uri=uri, system_metrics=True)
    assert off.monitor is None
    off.finish()
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "TRUE")
    on = MlflowTracker("toy", "m-seed1", uri=uri, system_metrics=True)
    assert on.monitor is not None
    on.finish()
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "sometimes")
    with pytest.raises(SwarmlabError, match="MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING='sometimes': use true or false"):
        check_tracking_uri(uri)


def test_a_later_stage_leaves_the_training_runs_duration_alone(tmp_path):
    """evaluate and sample log into the training run (keep_end_time): it ends when its training ended, so MLflow's
    Duration is the training's; a resumed training (a sweep trial's, a longer run's) ends anew."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    train = MlflowTracker("toy", "m-seed0", uri=uri)
    train.finish()
    trained = client.get_run(train.run_id).info.end_time
    time.sleep(0.05)
    evaluate = MlflowTracker("toy", run_id=train.run_id, uri=uri, keep_end_time=True)
    assert client.get_run(train.run_id).info.status == "RUNNING"
    evaluate.log_metrics({"test_accuracy": 0.5})
    evaluate.finish()
    info = client.get_run(train.run_id).info
    assert info.end_time == trained and info.status == "FINISHED"
    time.sleep(0.05)
    again = MlflowTracker("toy", run_id=train.run_id, uri=uri)
    again.finish()
    assert client.get_run(train.run_id).info.end_time > trained
