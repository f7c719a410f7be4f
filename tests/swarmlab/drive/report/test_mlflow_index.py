"""The report's view of the MLflow store finds a stage's run by its key (the ``run`` tag) whatever its display name
(``<model>-seed<k> | <profile> | ...``), and never an ablation point's run."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from swarmlab.drive.report.mlflow_index import MlflowIndex


def test_latest_finds_the_run_by_its_key_not_its_display_name(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("toy", artifact_location=str(tmp_path / "art"))

    def make(name: str, tags: dict) -> str:
        run = client.create_run(exp, run_name=name, tags=tags)
        client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    old = make("m-seed0", {})  # a run from before display names: found by its name
    new = make("m-seed0 | smoke | exp tidy-fawn", {"run": "m-seed0"})
    make("m-seed0 [layers n=2] | smoke", {"run": "m-seed0", "ablation_grid": "layers"})
    make("m-seed1 | smoke", {"run": "m-seed1"})
    index = MlflowIndex(uri, "http://127.0.0.1:5000")
    run, count = index.latest("toy", "m-seed0")
    assert (run.info.run_id, count) == (new, 2)
    assert old != new and index.latest("toy", "m-seed2") == (None, 0)


def test_a_store_that_cannot_be_read_is_one_line_not_a_report_without_links(tmp_path):
    """No sqlite file yet: no links (nothing to lose). A damaged file or a server that is not there: one line, so
    that the report is not rewritten without the links it had (issue 39)."""
    import socket

    import pytest

    from swarmlab.errors import SwarmlabError

    missing = MlflowIndex(f"sqlite:///{tmp_path / 'none.db'}", "http://127.0.0.1:5000")
    assert not missing.ok and "no store at" in missing.status
    (tmp_path / "bad.db").write_bytes(b"not a database at all" * 50)
    with pytest.raises(SwarmlabError, match="--no-mlflow"):
        MlflowIndex(f"sqlite:///{tmp_path / 'bad.db'}", "http://127.0.0.1:5000")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SwarmlabError, match=f"127.0.0.1:{port}.*--no-mlflow"):
        MlflowIndex(f"http://127.0.0.1:{port}", "http://127.0.0.1:5000")
    good = f"sqlite:///{tmp_path / 'good.db'}"
    MlflowClient(good).create_experiment("toy", artifact_location=str(tmp_path / "art"))
    index = MlflowIndex(good, "http://127.0.0.1:5000")
    assert index.ok and index.get("0123456789abcdef0123456789abcdef") is None  # the store answered: no such run


def test_cite_names_a_recorded_run_it_cannot_link(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("toy", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(exp, run_name="m-seed0").info.run_id
    index = MlflowIndex(uri, "http://127.0.0.1:5000")
    run = index.get(run_id)
    assert index.cite(run, run_id) == f"[run {run_id[:8]}](http://127.0.0.1:5000/#/experiments/{exp}/runs/{run_id})"
    absent = "f" * 32
    assert index.get(absent) is None and index.cite(None, absent) == "run `ffffffff` (not in this store)"
    assert index.cite(None, None) == "no MLflow run"
    none = MlflowIndex(f"sqlite:///{tmp_path / 'none.db'}", "http://127.0.0.1:5000")
    assert none.cite(None, absent) == "run `ffffffff` (no store read here)"
