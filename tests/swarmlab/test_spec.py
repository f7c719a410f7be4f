"""Resolve once (issue 36): swarmlab.drive.spec turns params into frozen specs equal to what the stages resolve today."""

from __future__ import annotations

import dataclasses

import pytest

from swarmlab.errors import SwarmlabError
from swarmlab.drive.params import load_params
from swarmlab.drive.run_config import evaluate_settings, model_overrides, train_config
from swarmlab.drive.runs import make_task, task_runs
from swarmlab.drive.spec import RunSpec, resolve
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("profile", ["smoke", "cpu", "claims"])
@pytest.mark.parametrize("key", ["imdb", "clustering_direct", "clustering_mog", "listops", "mnist"])
def test_a_stage_spec_is_what_the_stages_resolve(profile, key):
    params = load_params(profile=profile)
    # the resolution itself, from the pins: a swept task (the claims profile's clustering_direct and listops) trains
    # what its sweep chose, which tests/swarmlab/drive/test_tuning.py checks
    params["tasks"][key]["tuning"] = "pinned"
    spec = resolve(params, "train", key, tracking=False, root=REPO_ROOT)
    if spec.skip:
        assert spec.runs == ()
        return
    assert [r.run for r in spec.runs] == task_runs(params, key)
    for r in spec.runs:
        assert r.train == train_config(params, key, r.model, seed=r.seed)
        assert dict(r.overrides) == model_overrides(params, key, r.model)
        assert dict(r.evaluate) == evaluate_settings(params, key)
        assert r.profile == profile and r.name == f"{r.model}-seed{r.seed}"
    built, made = spec.task.build(), make_task(params, key, root=REPO_ROOT)
    assert built.key == made.key == key and built.options == made.options and type(built) is type(made)


def test_a_run_spec_survives_the_trip_to_a_worker():
    spec = resolve(load_params(profile="smoke"), "train", "clustering_direct", tracking=False)
    for r in spec.runs:
        again = RunSpec.from_dict(r.to_dict())
        assert again == r and dataclasses.is_dataclass(again.train)


def test_specs_are_frozen_and_bad_input_is_one_line():
    params = load_params(profile="smoke")
    spec = resolve(params, "train", "clustering_direct", tracking=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.runs[0].seed = 5  # type: ignore[misc]
    with pytest.raises(SwarmlabError, match="unknown task 'imbd'; did you mean imdb"):
        resolve(params, "train", "imbd", tracking=False)
    with pytest.raises(SwarmlabError, match=r"unknown model 'swram'.*tasks.clustering_direct.models"):
        resolve(params, "train", "clustering_direct", models=["swram"], tracking=False)
    with pytest.raises(SwarmlabError, match="takes 'text' inputs but task 'clustering_direct' needs 'set'"):
        resolve(params, "train", "clustering_direct", models=["transformer"], tracking=False)
    with pytest.raises(SwarmlabError, match="--parallel must be >= 0"):
        resolve(params, "train", "clustering_direct", parallel=-1, tracking=False)
    assert resolve(params, "train", "clustering_direct", parallel=3, tracking=False).schedule.parallel == 3
    assert resolve(params, "sample", "mnist", schedule=False, tracking=False).schedule is None
    assert resolve(params, "train", "clustering_direct", models=["swarm"], tracking=False).runs[0].model == "swarm"
