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
