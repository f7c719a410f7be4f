"""From params to a run: task sections (aliases included), models of the right kind, engine settings."""
import copy

import pytest

from pipelines.common.params import load_params
from pipelines.common.runs import build_model, make_task, train_config
from swarmlab.errors import SwarmlabError


def params_with(**sections) -> dict:
    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"].update(sections)
    return params


def test_a_section_may_run_a_registered_task_under_its_own_name(tmp_path):
    params = params_with(counting={"task": "toy_counting", "models": ["transformer"], "model_overrides": {},
                                   "train": {"max_epochs": 0, "max_steps": 4, "eval_every": 2},
                                   "options": {"seq_len": 8, "vocab_size": 5}})
    task = make_task(params, "counting")
    assert (task.name, task.key, task.options.seq_len) == ("toy_counting", "counting", 8)
    assert train_config(params, "counting").max_steps == 4

    from pipelines.train import train

    params["train"].update(device="cpu")
    metrics = train(params, "counting", out_root=tmp_path / "out", report_root=tmp_path / "rep", tracking=False)
    assert metrics["transformer"]["steps"] == 4
    assert (tmp_path / "out" / "counting" / "transformer" / "best.pt").is_file()
    assert (tmp_path / "rep" / "train" / "counting" / "metrics.json").is_file()


@pytest.mark.parametrize(("key", "section", "message"), [
    ("imbd", None, "unknown task 'imbd'; did you mean imdb?"),
    ("counting", {"task": "toy_countin", "models": ["transformer"]}, "unknown task 'toy_countin'; did you mean toy_counting?"),
    ("counting", {"task": "toy_counting", "models": ["transformer"], "options": {"seq_len": "8"}},
     "tasks.counting.options.seq_len must be an int >= 2, got str '8'"),
    ("counting", {"task": "toy_counting", "models": ["transformer"], "options": {"colour": 1}},
     "tasks.counting.options: unknown key(s) 'colour'"),
    ("counting", {"task": "toy_counting", "models": ["transformer"], "options": {"rng": "torch"}},
     "tasks.counting.options.rng must be one of numpy, step, got 'torch'"),
    ("counting", {"task": "toy_counting", "models": []}, "tasks.counting: models is empty"),
    ("counting", {"task": "toy_counting", "models": ["transformer"], "modles": []}, "tasks.counting: unknown key(s) 'modles'"),
])
def test_bad_task_sections_are_one_line_errors(key, section, message):
    params = params_with(**({key: section} if section else {}))
    with pytest.raises(SwarmlabError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")) as info:
        make_task(params, key)
    assert "\n" not in str(info.value)


def test_a_model_of_another_kind_is_refused_naming_the_section():
    params = params_with()
    task = make_task(params, "toy_counting")
    with pytest.raises(SwarmlabError, match=r"model 'swarm' takes 'set' inputs but task 'toy_counting' .*tasks.toy_counting.models"):
        build_model("swarm", task, {})


def test_the_data_stage_refuses_a_task_with_stages_of_its_own(tmp_path):
    from pipelines.data import build

    with pytest.raises(SwarmlabError, match="has no data@ stage"):
        build(params_with(), "imdb", report_root=tmp_path)


def test_model_overrides_may_hold_fields_for_one_model_only():
    from pipelines.common.runs import model_overrides

    params = params_with()
    params["tasks"]["clustering_mog"]["model_overrides"] = {"dim_hidden": 8, "swarm": {"head": "mean", "n_iter": 2},
                                                            "set_transformer_isab": {"head": "pma", "dim_hidden": 16}}
    assert model_overrides(params, "clustering_mog", "swarm") == {"dim_hidden": 8, "head": "mean", "n_iter": 2}
    assert model_overrides(params, "clustering_mog", "set_transformer_isab") == {"dim_hidden": 16, "head": "pma"}
    assert model_overrides(params, "clustering_mog") == {"dim_hidden": 8}
    task = make_task(params, "clustering_mog")
    assert build_model("set_transformer_isab", task, model_overrides(params, "clustering_mog", "set_transformer_isab")).cfg.head == "pma"
    params["tasks"]["clustering_mog"]["model_overrides"] = {"swram": {"head": "mean"}}
    with pytest.raises(SwarmlabError, match=r"model_overrides.swram is a mapping but no registered model is called 'swram'"):
        model_overrides(params, "clustering_mog", "swarm")
