"""How each model's settings are chosen (swarmlab/drive/tuning.py): pinned, or by its sweep on validation, carried
to the final runs through reports/sweep/<task>/chosen.json; a model whose trials stayed at chance is not chosen."""

from __future__ import annotations

import copy
import json

import pytest

from swarmlab.drive.params import load_params
from swarmlab.drive.sections import task_section
from swarmlab.drive.spec import resolve
from swarmlab.drive.tuning import (
    apply_chosen,
    chosen_path,
    describe,
    learned,
    pinned_record,
    sweep_record,
    write_chosen,
)
from swarmlab.errors import SwarmlabError


class Space:
    """What a model's resolved space gives sweep_record: its split of a trial's values."""

    def split(self, values):
        return {k: v for k, v in values.items() if k in ("lr", "batch_size")}, {
            k: v for k, v in values.items() if k not in ("lr", "batch_size")
        }


def result(score, params=None, trials=4):
    best = None if score is None else {"best_val_accuracy": score, "params": params or {"lr": 1e-3, "dim": 16}}
    return {"best": best, "rows": [{}] * trials}


def record(key="clustering_direct", profile="smoke", **models):
    return sweep_record(
        key=key,
        profile=profile,
        sweep_id="s1",
        metric="best_val_accuracy",
        mode="max",
        results=models,
        spaces={m: Space() for m in models},
        budget={"max_steps": 200, "max_epochs": 0, "time_budget_s": 0},
        chance=(0.5, 400),
    )


def test_learned_means_beyond_two_standard_errors_of_chance():
    # chance 0.5 over 400 rows: se 0.025, so 0.55 is the edge
    assert not learned(0.54, (0.5, 400), "max") and learned(0.56, (0.5, 400), "max")
    assert not learned(float("nan"), (0.5, 400), "max") and not learned(None, (0.5, 400), "max")
    assert learned(0.5, None, "max")  # a loss has no chance floor: every sweep learned something to compare
    assert learned(0.44, (0.5, 400), "min") and not learned(0.48, (0.5, 400), "min")


def test_a_model_at_chance_is_not_chosen_by_a_tie_break():
    rec = record(good=result(0.80), flat=result(0.51), cut=result(None))
    assert rec["models"]["good"] == {
        "trials": 4,
        "score": 0.80,
        "learned": True,
        "train": {"lr": 1e-3},
        "model_overrides": {"dim": 16},
    }
    for name in ("flat", "cut"):
        assert rec["models"][name]["learned"] is False and "train" not in rec["models"][name]
        assert rec["models"][name]["why"].startswith("did not learn at this budget: best best_val_accuracy")
    assert "chance 0.5000 over 400 rows" in rec["models"]["flat"]["why"]
    assert describe(rec, "good") == "sweep s1: 4 trials of 200 steps, chosen on validation: dim=16, lr=0.001"
    assert describe(rec, "flat").endswith("(pinned settings)") and "did not learn at this budget" in describe(
        rec, "flat"
    )
    assert describe(rec, "other") == "pinned (not in sweep s1)"
    assert describe(pinned_record("t", "cpu"), "good") == "pinned"


@pytest.fixture
def params():
    p = copy.deepcopy(load_params(profile="smoke"))
    section = p["tasks"]["clustering_direct"]
    section["models"] = ["swarm", "set_linear_mean"]
    section["train"] = {"lr": 1e-3, "set_*": {"batch_size": 3}}
    return p


def test_a_pinned_task_trains_its_params(params, tmp_path):
    same, tuning = apply_chosen(params, "clustering_direct", tmp_path)
    assert same is params and tuning == {"swarm": "pinned", "set_linear_mean": "pinned"}
    write_chosen(chosen_path(tmp_path, "clustering_direct").parent, record(swarm=result(0.9, {"lr": 5e-2})))
    same, _ = apply_chosen(params, "clustering_direct", tmp_path)  # a sweep's file does not override the pins
    assert same is params


def test_a_swept_task_trains_what_its_sweep_chose(params, tmp_path):
    params["tasks"]["clustering_direct"]["tuning"] = "sweep"
    with pytest.raises(
        SwarmlabError,
        match=r"tuning is sweep but .*chosen.json is missing: run its sweep first: "
        r"dvc repro sweeps/dvc.yaml:sweep@clustering_direct",
    ):
        apply_chosen(params, "clustering_direct", tmp_path)
    folder = chosen_path(tmp_path, "clustering_direct").parent
    write_chosen(
        folder, record(swarm=result(0.9, {"lr": 5e-2, "dim_hidden": 32}), set_linear_mean=result(0.9, {"lr": 2e-2}))
    )
    out, tuning = apply_chosen(params, "clustering_direct", tmp_path)
    assert params["tasks"]["clustering_direct"]["train"] == {"lr": 1e-3, "set_*": {"batch_size": 3}}  # not mutated
    train = out["tasks"]["clustering_direct"]["train"]
    assert train["swarm"] == {"lr": 5e-2}
    assert train["set_linear_mean"] == {"batch_size": 3, "lr": 2e-2}  # keeps what its glob gave it
    pinned = params["tasks"]["clustering_direct"]["model_overrides"]["swarm"]  # {n_iter: 2} in the smoke profile
    assert out["tasks"]["clustering_direct"]["model_overrides"]["swarm"] == {**pinned, "dim_hidden": 32}
    assert tuning["swarm"].startswith("sweep s1: 4 trials of 200 steps, chosen on validation")
    runs = {r.model: r for r in resolve(params, "train", "clustering_direct", root=tmp_path).runs}
    assert runs["swarm"].train.lr == 5e-2 and runs["swarm"].overrides["dim_hidden"] == 32
    assert runs["set_linear_mean"].train.lr == 2e-2 and runs["set_linear_mean"].train.batch_size == 3
    assert runs["swarm"].tuning == tuning["swarm"]

    write_chosen(folder, record(swarm=result(0.5), set_linear_mean=result(0.9, {"lr": 2e-2})))
    runs = {r.model: r for r in resolve(params, "train", "clustering_direct", root=tmp_path).runs}
    assert runs["swarm"].train.lr == 1e-3 and "did not learn at this budget" in runs["swarm"].tuning  # its pins


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "is not a sweep's choice"),
        (json.dumps(pinned_record("clustering_direct", "smoke")), "holds 'pinned' settings"),
        (json.dumps({**record(), "task": "imdb"}), "of task 'imdb', not a sweep of 'clustering_direct'"),
        (json.dumps(record(profile="cpu")), "chosen under profile 'cpu', not 'smoke'"),
    ],
)
def test_a_choice_that_is_not_this_sweeps_is_one_line(params, tmp_path, content, fragment):
    params["tasks"]["clustering_direct"]["tuning"] = "sweep"
    path = chosen_path(tmp_path, "clustering_direct")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(SwarmlabError, match=fragment) as err:
        apply_chosen(params, "clustering_direct", tmp_path)
    assert "\n" not in str(err.value) and "sweep@clustering_direct" in str(err.value)


def test_an_unknown_tuning_is_refused_where_it_is_written(params):
    params["tasks"]["clustering_direct"]["tuning"] = "swept"
    with pytest.raises(SwarmlabError, match=r"tasks.clustering_direct.*tuning.*swept"):
        task_section(params, "clustering_direct")
