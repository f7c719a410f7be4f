"""The task keys are written once, as params.yaml's `defaults.tasks` sections; the `foreach` lists of dvc.yaml and
sweeps/dvc.yaml (and the train stage's monitors) are generated from them and the task classes
(`python -m swarmlab.drive.dvcdeps`, `task_lists`). The first test checks that the files are current; the others check
the generated lists against the rules, stated apart from the generator:

* the pipeline's tasks are the sections of `defaults.tasks` except those that say `pipeline: false`
  (`toy_counting`, the template; `arxiv11`, bring your own copy): `train@` and `evaluate@` run exactly these;
* `derive@` and `data@` build the data of exactly the pipeline tasks whose task has its own `build_data` in one step,
  each task in one of the two; a task built in steps (`Task.data_steps`: IMDB's prepare, augment, tokenize) has a
  stage per step, named after it, that runs the data stage for that step and writes the step's folder;
* `sample@` runs exactly the pipeline tasks whose task has its own `sample`;
* `frontier@` runs pipeline tasks only;
* sweeps/dvc.yaml's `sweep@` runs exactly the tasks with a search space (`defaults.sweep.spaces`), and every task
  `train@` runs is one of them (`train@` and `evaluate@` depend on what it chose);
* each `train@` item's `monitor` (the history plot's y) is the task's validation metric.
"""

from __future__ import annotations


import pytest
import yaml

from swarmlab.drive.params import load_params
from swarmlab.drive.dvcdeps import regenerate_lists, task_lists
from swarmlab.drive.runs import make_task
from tasks import task_class
from tasks.base import Task
from tests.conftest import REPO_ROOT

PARAMS_TEXT = (REPO_ROOT / "params.yaml").read_text()
SECTIONS = yaml.safe_load(PARAMS_TEXT)["defaults"]["tasks"]
DVC = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
SWEEPS = yaml.safe_load((REPO_ROOT / "sweeps" / "dvc.yaml").read_text())["stages"]


def foreach(stages: dict, name: str) -> dict:
    items = stages[name]["foreach"]
    return items if isinstance(items, dict) else {key: key for key in items}


def off_pipeline() -> set[str]:
    """Sections that say `pipeline: false`."""
    return {key for key, section in SECTIONS.items() if section.get("pipeline") is False}


def task_of(key: str) -> type:
    return task_class(SECTIONS[key].get("task") or key)


PIPELINE = set(SECTIONS) - off_pipeline()
PARAMS = load_params(profile="cpu")
STEPPED = {  # pipeline task -> its data steps (step -> folder), empty for a task built in one step
    key: make_task(PARAMS, key, root=REPO_ROOT).data_steps()
    for key in PIPELINE
    if task_of(key).build_data is not Task.build_data
}


@pytest.mark.parametrize("name", ["dvc.yaml", "sweeps/dvc.yaml"])
def test_the_task_lists_are_the_generated_ones(name):
    text = (REPO_ROOT / name).read_text()
    _, changed = regenerate_lists(text, task_lists()[name])
    assert not changed, f"{name}: the task lists of {changed} are not current: python -m swarmlab.drive.dvcdeps"


def test_the_off_pipeline_tasks_are_the_documented_ones():
    assert off_pipeline() == {"toy_counting", "arxiv11"}  # a new one must say so in params.yaml, and here


@pytest.mark.parametrize("stage", ["train", "evaluate"])
def test_train_and_evaluate_run_every_pipeline_task(stage):
    keys = set(foreach(DVC, stage))
    assert keys == PIPELINE, (
        f"dvc.yaml {stage}@ runs {sorted(keys)}, params.yaml's pipeline tasks are {sorted(PIPELINE)}: "
        f"python -m swarmlab.drive.dvcdeps, or say `pipeline: false` in the section"
    )


def test_derive_and_data_build_every_task_that_builds_its_own_data():
    derive, data = set(foreach(DVC, "derive")), set(foreach(DVC, "data"))
    builders = {key for key in PIPELINE if task_of(key).build_data is not Task.build_data and not STEPPED.get(key)}
    assert not derive & data, f"tasks in both derive@ and data@: {sorted(derive & data)}"
    assert derive | data == builders, (
        f"derive@ + data@ {sorted(derive | data)} != tasks with build_data {sorted(builders)}"
    )
    train = foreach(DVC, "train")
    for key in derive:
        assert foreach(DVC, "derive")[key]["data"] == train[key]["data"], key
    for key in data:
        assert train[key]["data"] == f"data/{key}", key


def test_a_task_built_in_steps_has_a_stage_per_step():
    stepped = {key: steps for key, steps in STEPPED.items() if steps}
    assert "imdb" in stepped, "IMDB builds its data in three steps (tasks/imdb.py)"
    for key, steps in stepped.items():
        for step, folder in steps.items():
            assert step in DVC, f"{key} builds its data in the step {step!r}: dvc.yaml needs a stage {step!r}"
            stage = DVC[step]
            assert stage["cmd"] == f"python -m pipelines.data --task {key} --step {step}", step
            outs = [o if isinstance(o, str) else next(iter(o)) for o in stage["outs"]]
            assert folder.relative_to(REPO_ROOT).as_posix() in outs, (step, outs)
            assert f"reports/data/{key}/{step}/metrics.json" in outs, (step, outs)


def test_sample_runs_every_generative_task():
    generative = {key for key in PIPELINE if task_of(key).sample is not Task.sample}
    assert set(foreach(DVC, "sample")) == generative


def test_frontier_runs_pipeline_tasks_only():
    assert set(foreach(DVC, "frontier")) <= PIPELINE


def test_sweeps_run_every_task_with_a_search_space():
    spaces = set(yaml.safe_load(PARAMS_TEXT)["defaults"]["sweep"]["spaces"])
    assert spaces <= set(SECTIONS)
    assert set(foreach(SWEEPS, "sweep")) == spaces
    # train@<task> reads what sweep@<task> chose (reports/sweep/<task>/chosen.json): every trained task has one
    assert set(foreach(DVC, "train")) <= set(foreach(SWEEPS, "sweep"))
    for stage in ("train", "evaluate"):
        deps = DVC[stage]["do"]["deps"]
        assert "reports/sweep/${key}/chosen.json" in deps, (stage, deps)


def test_each_history_plot_shows_the_task_monitor():
    for key, item in foreach(DVC, "train").items():
        assert item["monitor"] == f"val_{task_of(key).monitor}", key
