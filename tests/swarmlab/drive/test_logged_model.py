"""A training run's best checkpoint as an MLflow model (swarmlab/drive/training/logged_model.py): rebuilt from the
config run.json records, it is the model the stage builds, and a logged model that would predict otherwise is refused.
The whole round trip through MLflow (logged by a training run, loaded by ``mlflow.pyfunc.load_model``) is in
tests/tasks/test_image_generation.py and tests/e2e/test_pipeline_e2e.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import yaml

import models
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import build_model
from swarmlab.drive.runs import task_spec
from swarmlab.drive.training.logged_model import CheckpointModel, checked_example
from swarmlab.errors import SwarmlabError


def recorded(cfg) -> dict:
    """A model's config as training records it in run.json (``model_cfg``)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


@pytest.mark.parametrize("name", models.list_models())
def test_every_model_is_rebuilt_from_its_recorded_config(name):
    model = models.create_model(name)
    assert models.create_model(name, **recorded(model.cfg)).cfg == model.cfg


def test_the_logged_model_predicts_what_the_stage_model_does_and_is_refused_otherwise(tmp_path):
    params = load_params(profile="smoke")
    spec = task_spec(params, "toy_counting", root=tmp_path)
    task = spec.build()
    torch.manual_seed(0)
    reference = build_model("transformer", task, {"d_model": 16, "num_layers": 1, "num_heads": 2}).eval()
    torch.save(reference.state_dict(), tmp_path / "best.pt")
    (tmp_path / "run.json").write_text(json.dumps({"model": "transformer", "model_cfg": recorded(reference.cfg)}))
    spec_file = tmp_path / "run_spec.yaml"
    spec_file.write_text(yaml.safe_dump({"task": dataclasses.asdict(spec)}))
    val = task.eval_data("val", reference.cfg)

    inputs, output, artifacts = checked_example(task, reference, val, tmp_path, spec_file)
    assert list(inputs) == ["input_ids", "attention_mask"]  # what the forward pass reads: not the labels
    assert inputs["input_ids"].shape[0] == 2 and output.shape == (2, task.num_classes)
    assert set(artifacts) == {"weights", "run", "spec"}

    loaded = CheckpointModel()
    loaded.load_context(type("Context", (), {"artifacts": artifacts})())
    assert (loaded.predict(None, inputs) == output).all()

    nudged = {k: v + 1e-3 if v.is_floating_point() else v for k, v in reference.state_dict().items()}
    torch.save(nudged, tmp_path / "best.pt")  # weights that are not the reference's
    with pytest.raises(SwarmlabError, match="predicts otherwise than its best.pt"):
        checked_example(task, reference, val, tmp_path, spec_file)


def test_a_model_that_fails_its_check_is_not_logged_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    """The check guards the MLflow model, not the run: a failure is one warning and no model (best.pt stands)."""
    from types import SimpleNamespace

    import swarmlab.drive.training.logged_model as logged_model
    from swarmlab.drive.training.run import _log_model

    params = load_params(profile="smoke")
    task = task_spec(params, "toy_counting", root=tmp_path).build()
    overrides = {"d_model": 16, "num_layers": 1, "num_heads": 2}
    torch.save(build_model("transformer", task, overrides).state_dict(), tmp_path / "best.pt")

    def refuse(*args):
        raise SwarmlabError("the MLflow model of x predicts otherwise than its best.pt: not logged")

    monkeypatch.setattr(logged_model, "checked_example", refuse)
    logged = []
    tracker = SimpleNamespace(log_model=lambda *args, **kwargs: logged.append(args))
    run = SimpleNamespace(model="transformer", overrides=overrides, name="transformer-seed0", seed=0)
    with caplog.at_level("WARNING"):
        _log_model(task, run, SimpleNamespace(best_step=1), tracker, None, tmp_path, tmp_path / "spec.yaml")
    assert logged == []
    assert "train toy_counting/transformer-seed0: the MLflow model of x predicts otherwise" in caplog.text
    monkeypatch.setattr(logged_model, "checked_example", lambda *args: ({"x": 1}, {"y": 2}, {"weights": "w"}))
    _log_model(task, run, SimpleNamespace(best_step=1), tracker, None, tmp_path, tmp_path / "spec.yaml")
    assert len(logged) == 1 and logged[0][0] == "toy_counting-transformer-seed0"  # the same call, checked: logged
