"""A store moved or copied with its repository keeps its artifacts (#38 item 3): MLflow writes absolute artifact
locations, so the experiments this project placed are re-rooted beside the store before `swarmlab ui` serves it, and
when a stage's tracker opens it."""

from __future__ import annotations

import shutil
import socket
import sqlite3

import pytest

from swarmlab.errors import SwarmlabError
from swarmlab.mlflow_ui import main, store_file
from swarmlab.tracking import MlflowTracker, reroot_artifacts

# "_" in a name: a LIKE pattern would read it as a wildcard; the re-rooting compares plain prefixes
EXPERIMENTS = ("clustering_direct", "imdb")


def _store(root):
    """A store at ``root/mlruns.db`` written as the stages write it: two experiments, a run each with an artifact,
    and a logged model with a file."""
    from mlflow.tracking import MlflowClient

    root.mkdir()
    uri = f"sqlite:///{root / 'mlruns.db'}"
    note = root / "note.txt"
    note.write_text("kept")
    runs = {}
    for name in EXPERIMENTS:
        tracker = MlflowTracker(name, f"{name}-seed0", uri=uri)
        tracker.log_artifact(note)
        tracker.finish()
        runs[name] = tracker.run_id
    client = MlflowClient(uri)
    model = client.create_logged_model(
        client.get_experiment_by_name("imdb").experiment_id, name="imdb-m-seed0", source_run_id=runs["imdb"]
    )
    client.log_model_artifact(model.model_id, str(note))
    return uri, runs, model.model_id


def _read(uri, run_id, dst):
    from mlflow.tracking import MlflowClient

    return (MlflowClient(uri).download_artifacts(run_id, "note.txt", str(dst))).endswith("note.txt")


def test_a_moved_store_keeps_its_artifacts_and_new_runs_land_beside_it(tmp_path):
    from mlflow.tracking import MlflowClient

    old_uri, runs, model_id = _store(tmp_path / "a")
    (tmp_path / "b").parent.mkdir(exist_ok=True)
    shutil.move(tmp_path / "a", tmp_path / "b")  # the repository moved
    uri = f"sqlite:///{tmp_path / 'b' / 'mlruns.db'}"
    with pytest.raises(Exception):  # noqa: B017  (MLflow's own error for a folder that is gone)
        _read(uri, runs["imdb"], tmp_path / "before")
    moved = reroot_artifacts(tmp_path / "b" / "mlruns.db")
    assert len(moved) == 2 and all("/a/mlartifacts/" in line and "/b/mlartifacts/" in line for line in moved)
    for name in EXPERIMENTS:
        dst = tmp_path / f"after-{name}"
        dst.mkdir()
        assert _read(uri, runs[name], dst) and (dst / "note.txt").read_text() == "kept"
    client = MlflowClient(uri)
    model = client.get_logged_model(model_id)
    assert model.artifact_location.startswith((tmp_path / "b" / "mlartifacts" / "imdb").as_uri() + "/")
    import mlflow.artifacts

    got = mlflow.artifacts.download_artifacts(
        artifact_uri=model.artifact_location + "/note.txt", dst_path=str(tmp_path)
    )
    assert open(got).read() == "kept"
    new = MlflowTracker("imdb", "imdb-seed1", uri=uri)  # a later run of the moved store writes beside it
    assert client.get_run(new.run_id).info.artifact_uri.startswith((tmp_path / "b" / "mlartifacts").as_uri())
    new.finish()
    assert reroot_artifacts(tmp_path / "b" / "mlruns.db") == []  # once is enough


def test_a_stage_that_opens_a_moved_store_re_roots_it_first(tmp_path, caplog):
    """No `swarmlab ui` needed: the tracker of the next run re-roots the store it opens, and writes beside it."""
    from mlflow.tracking import MlflowClient

    _, runs, _ = _store(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    uri = f"sqlite:///{tmp_path / 'b' / 'mlruns.db'}"
    with caplog.at_level("INFO"):
        new = MlflowTracker("clustering_direct", "clustering_direct-seed1", uri=uri)
    assert caplog.text.count("re-rooted ") == 2
    new.log_artifact(tmp_path / "b" / "note.txt")
    new.finish()
    run = MlflowClient(uri).get_run(new.run_id)
    assert run.info.artifact_uri.startswith((tmp_path / "b" / "mlartifacts" / "clustering_direct").as_uri() + "/")
    assert (tmp_path / "b" / "mlartifacts" / "clustering_direct" / new.run_id / "artifacts" / "note.txt").is_file()
    dst = tmp_path / "read"
    dst.mkdir()
    assert _read(uri, runs["imdb"], dst)  # the earlier runs' artifacts too
    assert not (tmp_path / "a").exists()  # nothing written to the old place


def test_a_copied_store_is_re_rooted_to_its_own_artifacts_one_without_them_is_left(tmp_path):
    from mlflow.tracking import MlflowClient

    _store(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "copy")  # a copy: the original is still there
    assert len(reroot_artifacts(tmp_path / "copy" / "mlruns.db")) == 2
    location = MlflowClient(f"sqlite:///{tmp_path / 'copy' / 'mlruns.db'}").get_experiment_by_name("imdb")
    assert location.artifact_location == (tmp_path / "copy" / "mlartifacts" / "imdb").as_uri()
    (tmp_path / "lone").mkdir()
    shutil.copy(tmp_path / "a" / "mlruns.db", tmp_path / "lone")  # the database alone: its artifacts are elsewhere
    before = (tmp_path / "lone" / "mlruns.db").read_bytes()
    assert reroot_artifacts(tmp_path / "lone" / "mlruns.db") == []
    assert (tmp_path / "lone" / "mlruns.db").read_bytes() == before
    assert reroot_artifacts(tmp_path / "a" / "mlruns.db") == []  # already beside its store


def test_ui_refuses_in_one_line_before_touching_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    with pytest.raises(SystemExit) as stop:
        main([])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "is no sqlite store" in err[0], err
    with pytest.raises(SwarmlabError, match="no MLflow store at"):
        store_file(str(tmp_path / "none.db"))
    (tmp_path / "text.db").write_text("not sqlite")
    with pytest.raises(SwarmlabError, match="is not a SQLite database"):
        store_file(str(tmp_path / "text.db"))
    _store(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    db = tmp_path / "b" / "mlruns.db"
    before = db.read_bytes()
    capsys.readouterr()  # MLflow's own lines while the store was made
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SystemExit) as stop:
            main(["--store", str(db), "--port", str(port)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and f"cannot serve on 127.0.0.1:{port}" in err[0], err
    assert db.read_bytes() == before  # refused before the re-rooting wrote anything
    with pytest.raises(SystemExit) as stop:
        main(["--store", str(db), "--port", "70000"])
    assert stop.value.code == 2 and "not a port number (1-65535)" in capsys.readouterr().err


def test_ui_re_roots_then_serves_the_store_and_prints_each_experiments_runs(tmp_path, monkeypatch, capsys):
    import subprocess

    from pipelines.cli import main as swarmlab

    _store(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    db = tmp_path / "b" / "mlruns.db"
    served = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, env: served.append((cmd, env)) or 3)
    assert swarmlab(["ui", "--store", str(db), "--port", "5999"]) == 3  # the server's exit status
    ((cmd, env),) = served
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "5999"
    assert (
        cmd[-2:] == ["--backend-store-uri", f"sqlite:///{db}"] and env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    )
    out = capsys.readouterr().out
    assert out.count("re-rooted ") == 2
    ids = dict(sqlite3.connect(db).execute("SELECT name, experiment_id FROM experiments").fetchall())
    for name in EXPERIMENTS:
        assert f"  {name}: http://127.0.0.1:5999/#/experiments/{ids[name]}?workflowType=machine_learning" in out
    assert "Default" not in out  # no runs
    assert main(["--store", str(db), "--reroot-only"]) == 0
    assert "already beside it" in capsys.readouterr().out and len(served) == 1
