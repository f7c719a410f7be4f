"""MLflow run names say which DVC experiment and which overrides a run came from, and are unique in their experiment
(swarmlab/tracking.py: run_context, run_title, unique_name)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from swarmlab.tracking import CONTEXT_ENV, params_overrides, run_context, run_title

PARAMS = {
    "profile": "cpu",
    "paths": {"datasets": "../shared/datasets"},
    "defaults": {"seed": 0, "train": {"lr": 0.001, "max_epochs": 2}},
    "augment": {"enabled": True},
    "schedule": {"parallel": 1},
}


def git_repo(tmp_path):
    """A one-commit git repo holding PARAMS as params.yaml."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "params"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return tmp_path / "params.yaml"


def edit(path, change):
    raw = yaml.safe_load(path.read_text())
    change(raw)
    path.write_text(yaml.safe_dump(raw))


def test_overrides_are_the_settings_that_differ_from_the_baseline_commit(tmp_path):
    path = git_repo(tmp_path)
    assert params_overrides(path, "HEAD") == ""  # nothing changed
    edit(path, lambda raw: raw["defaults"]["train"].update(lr=0.0003))
    edit(path, lambda raw: raw["augment"].update(enabled=False))
    edit(path, lambda raw: raw.update(profile="smoke", paths={"datasets": "/data"}, schedule={"parallel": 4}))
    edit(path, lambda raw: raw["defaults"]["train"].pop("max_epochs"))
    # profile has its own part of the name; paths and schedule change no result
    assert params_overrides(path, "HEAD") == "augment.enabled=false defaults.train.lr=0.0003 ~defaults.train.max_epochs"
    assert params_overrides(tmp_path / "nowhere.yaml", "HEAD") is None  # git cannot tell: no part in the name
    assert params_overrides(path, "no-such-rev") is None


def test_the_name_says_model_seed_profile_experiment_and_overrides(tmp_path, monkeypatch):
    path = git_repo(tmp_path)
    edit(path, lambda raw: raw["defaults"]["train"].update(lr=0.0003))
    for var in ("DVC_EXP_NAME", "DVC_EXP_BASELINE_REV", "DVC_STAGE", CONTEXT_ENV):
        monkeypatch.delenv(var, raising=False)
    params = {"profile": "cpu", "params_file": str(path)}
    assert run_title("m-seed0", "cpu", run_context(params)) == "m-seed0 | cpu | defaults.train.lr=0.0003"

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("DVC_EXP_NAME", "forte-noil")  # what `dvc exp run` sets for its stage commands
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", head)
    monkeypatch.setenv("DVC_STAGE", "train@imdb")
    context = run_context(params)
    assert context == {
        "dvc_exp_name": "forte-noil",
        "dvc_exp_baseline_rev": head,
        "dvc_stage": "train@imdb",
        "params_overrides": "defaults.train.lr=0.0003",
    }
    assert run_title("m-seed0", "cpu", context) == "m-seed0 | cpu | exp forte-noil | defaults.train.lr=0.0003"

    monkeypatch.setenv(CONTEXT_ENV, json.dumps({"dvc_exp_name": "driver-exp"}))  # a Ray worker: its driver's context
    assert run_context(params) == {"dvc_exp_name": "driver-exp"}
    long = run_title("m-seed0", "cpu", {"params_overrides": "x=" + "1" * 400})
    assert len(long) == 250 and long.endswith("…")


@pytest.mark.slow  # MLflow's import and store creation take seconds
def test_a_name_already_taken_gets_a_number(tmp_path):
    from mlflow.tracking import MlflowClient

    from swarmlab.tracking import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    names = [MlflowTracker("toy", "m-seed0 | cpu", uri=uri).run_id for _ in range(3)]
    names.append(MlflowTracker("toy", "m-seed1 | cpu", uri=uri).run_id)
    client = MlflowClient(uri)
    assert [client.get_run(r).info.run_name for r in names] == [
        "m-seed0 | cpu",
        "m-seed0 | cpu #2",
        "m-seed0 | cpu #3",
        "m-seed1 | cpu",
    ]


@pytest.mark.slow
def test_a_resume_without_tracking_keeps_the_runs_mlflow_id(tmp_path, monkeypatch):
    """`--resume --no-tracking` used to set run.json's run_id to null, cutting the run off its MLflow record."""
    import copy
    import json

    from pipelines.train import train
    from swarmlab.drive.params import load_params
    from swarmlab.machine import describe_cpu

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'store.db'}")
    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["toy_counting"].update(models=["transformer"])
    params["tasks"]["toy_counting"]["train"].update(max_steps=20, eval_every=10, batch_size=8)
    roots = {"out_root": tmp_path / "out", "report_root": tmp_path / "rep"}
    train(params, "toy_counting", parallel=1, **roots)
    record = tmp_path / "out" / "toy_counting" / "transformer-seed0" / "run.json"
    run_id = json.loads(record.read_text())["run_id"]
    assert run_id
    metrics = tmp_path / "rep" / "train" / "toy_counting" / "metrics.json"
    (entry,) = json.loads(metrics.read_text()).values()  # the record names its MLflow run and the CPU it ran on
    assert entry["mlflow_run_id"] == run_id and entry["cpu"] == describe_cpu()
    params["tasks"]["toy_counting"]["train"]["max_steps"] = 30  # a finished run given more steps
    train(params, "toy_counting", resume=True, tracking=False, parallel=1, **roots)
    assert json.loads(record.read_text())["run_id"] == run_id
    (entry,) = json.loads(metrics.read_text()).values()
    assert entry["mlflow_run_id"] == run_id and entry["steps"] == 30
