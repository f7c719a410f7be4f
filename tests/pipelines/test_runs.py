"""From params to a run: task sections (aliases included), models of the right kind, engine settings."""

import copy

import pytest

from swarmlab.drive.params import load_params
from swarmlab.drive.runs import make_task
from swarmlab.drive.run_config import build_model, train_config
from swarmlab.errors import SwarmlabError
from tests.conftest import REPO_ROOT


def params_with(**sections) -> dict:
    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"].update(sections)
    return params


def test_a_section_may_run_a_registered_task_under_its_own_name(tmp_path):
    params = params_with(
        counting={
            "task": "toy_counting",
            "models": ["transformer"],
            "model_overrides": {},
            "train": {"max_epochs": 0, "max_steps": 4, "eval_every": 2},
            "options": {"seq_len": 8, "vocab_size": 5},
        }
    )
    task = make_task(params, "counting")
    assert (task.name, task.key, task.options.seq_len) == ("toy_counting", "counting", 8)
    assert train_config(params, "counting").max_steps == 4

    from pipelines.train import train

    params["train"].update(device="cpu")
    metrics = train(params, "counting", out_root=tmp_path / "out", report_root=tmp_path / "rep", tracking=False)
    assert metrics["transformer-seed0"]["steps"] == 4 and metrics["transformer-seed0"]["model"] == "transformer"
    assert (tmp_path / "out" / "counting" / "transformer-seed0" / "best.pt").is_file()
    assert (tmp_path / "rep" / "train" / "counting" / "metrics.json").is_file()


@pytest.mark.parametrize(
    ("key", "section", "message"),
    [
        ("imbd", None, "unknown task 'imbd'; did you mean imdb?"),
        (
            "counting",
            {"task": "toy_countin", "models": ["transformer"]},
            "unknown task 'toy_countin'; did you mean toy_counting?",
        ),
        (
            "counting",
            {"task": "toy_counting", "models": ["transformer"], "options": {"seq_len": "8"}},
            "tasks.counting.options.seq_len must be an int >= 2, got str '8'",
        ),
        (
            "counting",
            {"task": "toy_counting", "models": ["transformer"], "options": {"colour": 1}},
            "tasks.counting.options: unknown key(s) 'colour'",
        ),
        (
            "counting",
            {"task": "toy_counting", "models": ["transformer"], "options": {"rng": "torch"}},
            "tasks.counting.options.rng must be one of numpy, step, got 'torch'",
        ),
        ("counting", {"task": "toy_counting", "models": []}, "tasks.counting: models is empty"),
        (
            "counting",
            {"task": "toy_counting", "models": ["transformer"], "modles": []},
            "tasks.counting: unknown key(s) 'modles'",
        ),
    ],
)
def test_bad_task_sections_are_one_line_errors(key, section, message):
    params = params_with(**({key: section} if section else {}))
    with pytest.raises(
        SwarmlabError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
    ) as info:
        make_task(params, key)
    assert "\n" not in str(info.value)


def test_a_model_of_another_kind_is_refused_naming_the_section():
    params = params_with()
    task = make_task(params, "toy_counting")
    with pytest.raises(
        SwarmlabError, match=r"model 'swarm' takes 'set' inputs but task 'toy_counting' .*tasks.toy_counting.models"
    ):
        build_model("swarm", task, {})


def test_the_data_stage_refuses_a_task_that_builds_no_data(tmp_path):
    from pipelines.data import build

    params = params_with()
    with pytest.raises(SwarmlabError, match="'toy_counting' .* has no data stage: it builds no data of its own"):
        build(params, "toy_counting", report_root=tmp_path)
    with pytest.raises(SwarmlabError, match="--step prepare: task 'clustering_mog' builds its data in one step"):
        build(params, "clustering_mog", step="prepare", report_root=tmp_path)
    assert not list(tmp_path.iterdir())


def test_model_overrides_may_hold_fields_for_one_model_only():
    from swarmlab.drive.run_config import model_overrides

    params = params_with()
    params["tasks"]["clustering_mog"]["model_overrides"] = {
        "dim_hidden": 8,
        "swarm": {"head": "mean", "n_iter": 2},
        "set_transformer_isab": {"head": "pma", "dim_hidden": 16},
    }
    assert model_overrides(params, "clustering_mog", "swarm") == {"dim_hidden": 8, "head": "mean", "n_iter": 2}
    assert model_overrides(params, "clustering_mog", "set_transformer_isab") == {"dim_hidden": 16, "head": "pma"}
    assert model_overrides(params, "clustering_mog") == {"dim_hidden": 8}
    task = make_task(params, "clustering_mog")
    assert (
        build_model(
            "set_transformer_isab", task, model_overrides(params, "clustering_mog", "set_transformer_isab")
        ).cfg.head
        == "pma"
    )
    params["tasks"]["clustering_mog"]["model_overrides"] = {"swram": {"head": "mean"}}
    with pytest.raises(
        SwarmlabError,
        match=r"model_overrides.swram is a mapping, so per-model settings, but no registered model is called 'swram'.*did you mean swarm",
    ):
        model_overrides(params, "clustering_mog", "swarm")


def test_a_task_may_hold_training_settings_for_one_model(tmp_path):
    params = params_with(
        counting={
            "task": "toy_counting",
            "models": ["transformer", "longformer"],
            "model_overrides": {},
            "train": {
                "max_epochs": 0,
                "max_steps": 2,
                "eval_every": 2,
                "lr": 1e-3,
                "trans*": {"lr": 3e-4, "batch_size": 4},
                "transformer": {"lr": 2e-4},
            },
            "options": {"seq_len": 8, "vocab_size": 5},
        }
    )
    assert (
        train_config(params, "counting", "transformer").lr,
        train_config(params, "counting", "transformer").batch_size,
    ) == (2e-4, params["train"]["batch_size"])  # the exact name wins over the pattern, whole mapping
    assert train_config(params, "counting", "longformer").lr == 1e-3
    assert train_config(params, "counting").lr == 1e-3

    from pipelines.train import train

    params["train"].update(device="cpu")
    train(params, "counting", out_root=tmp_path / "out", report_root=tmp_path / "rep", tracking=False)
    import csv

    for model, lr in (("transformer", 2e-4), ("longformer", 1e-3)):
        rows = list(csv.DictReader(open(tmp_path / "rep" / "train" / "counting" / "history" / f"{model}-seed0.csv")))
        assert float(rows[-1]["lr"]) == pytest.approx(lr)


@pytest.mark.parametrize(
    ("train", "message"),
    [
        (
            {"transfomer": {"lr": 1e-3}},
            r"tasks.counting.train.transfomer is a mapping, so per-model settings, but no "
            r"registered model is called 'transfomer' or matches it; did you mean transformer",
        ),
        ({"transformer": {"lr": -1.0}}, r"tasks.counting.train.transformer.lr must be > 0, got -1.0"),
        ({"transformer": {"dropout": 0.1}}, r"tasks.counting.train.transformer: unknown key\(s\) 'dropout'"),
    ],
)
def test_per_model_training_settings_are_checked_before_anything_trains(tmp_path, train, message):
    params = params_with(
        counting={
            "task": "toy_counting",
            "models": ["transformer"],
            "model_overrides": {},
            "train": {"max_epochs": 0, "max_steps": 2, "eval_every": 2, **train},
            "options": {"seq_len": 8, "vocab_size": 5},
        }
    )
    from pipelines.train import train as run_train

    with pytest.raises(SwarmlabError, match=message) as info:
        run_train(params, "counting", out_root=tmp_path / "out", report_root=tmp_path / "rep", tracking=False)
    assert "\n" not in str(info.value) and not (tmp_path / "out").exists()


def test_model_overrides_of_one_model_go_on_top_by_name_then_pattern():
    from swarmlab.drive.run_config import model_overrides

    params = params_with(
        counting={
            "task": "toy_counting",
            "models": ["transformer", "longformer"],
            "model_overrides": {
                "d_model": 32,
                "num_layers": 2,
                "longformer": {"num_layers": 5, "window_one_sided": 8},
                "*former": {"num_layers": 3},
                "trans*": {"num_layers": 4},
                "swarmformer*": {"t_local": 1},
            },
            "options": {"seq_len": 8, "vocab_size": 5},
        }
    )
    assert model_overrides(params, "counting") == {"d_model": 32, "num_layers": 2}  # no name: the shared ones only
    assert model_overrides(params, "counting", "longformer") == {"d_model": 32, "num_layers": 5, "window_one_sided": 8}
    assert model_overrides(params, "counting", "transformer") == {"d_model": 32, "num_layers": 3}  # the first pattern
    assert model_overrides(params, "counting", "swarmformer_small") == {"d_model": 32, "num_layers": 2, "t_local": 1}
    assert model_overrides(params, "counting", "hsw") == {"d_model": 32, "num_layers": 2}  # no entry matches
    task = make_task(params, "counting")
    model = build_model("longformer", task, model_overrides(params, "counting", "longformer"))
    assert (model.cfg.num_layers, model.cfg.window_one_sided, model.cfg.d_model) == (5, 8, 32)


@pytest.mark.parametrize(
    ("per_model", "message"),
    [
        (
            {"longfromer": {"num_layers": 5}},
            "tasks.counting.model_overrides.longfromer is a mapping, so per-model settings, "
            "but no registered model is called 'longfromer' or matches it; did you mean longformer",
        ),
        ({"nothing*": {}}, "no registered model is called 'nothing\\*' or matches it"),
    ],
)
def test_bad_per_model_overrides_are_one_line_errors(per_model, message):
    from swarmlab.drive.run_config import model_overrides

    params = params_with(counting={"task": "toy_counting", "models": ["transformer"], "model_overrides": per_model})
    with pytest.raises(SwarmlabError, match=message) as info:
        model_overrides(params, "counting", "transformer")
    assert "\n" not in str(info.value)


def test_a_refused_per_model_override_names_the_section():
    from swarmlab.drive.run_config import model_overrides

    params = params_with(
        counting={
            "task": "toy_counting",
            "models": ["transformer"],
            "model_overrides": {"transformer": {"num_heads": 3}},
            "options": {"seq_len": 8},
        }
    )
    with pytest.raises(
        SwarmlabError, match=r"d_model=128 is not divisible by num_heads=3 .*tasks.counting.model_overrides"
    ):
        build_model("transformer", make_task(params, "counting"), model_overrides(params, "counting", "transformer"))


def test_per_task_evaluate_settings_set_the_validation_and_test_batch():
    from swarmlab.drive.run_config import evaluate_settings

    params = params_with(counting={"task": "toy_counting", "models": ["transformer"], "evaluate": {"batch_size": 7}})
    assert evaluate_settings(params, "counting") == {**params["evaluate"], "batch_size": 7}
    assert train_config(params, "counting").eval_batch_size == 7
    assert train_config(params, "toy_counting").eval_batch_size == params["evaluate"]["batch_size"]
    params["tasks"]["counting"]["evaluate"] = {"batch": 7}
    with pytest.raises(SwarmlabError, match="tasks.counting.evaluate: unknown key\\(s\\) 'batch'; known: batch_size"):
        evaluate_settings(params, "counting")


def test_outside_git_the_commit_comes_from_the_environment(tmp_path, monkeypatch):
    """Outside git a run records 'unknown'; SWARMLAB_GIT_COMMIT, when set, wins (a copy on a GPU machine)."""
    import swarmlab.paths as paths

    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.delenv("SWARMLAB_GIT_COMMIT", raising=False)
    assert paths.git_commit() == "unknown"
    monkeypatch.setenv("SWARMLAB_GIT_COMMIT", "b45e467")
    assert paths.git_commit() == "b45e467"
    monkeypatch.setattr(paths, "REPO_ROOT", REPO_ROOT)  # in the real checkout too
    assert paths.git_commit() == "b45e467"


def test_a_run_is_dirty_when_code_differs_never_when_results_or_a_dvc_lock_do(tmp_path, monkeypatch):
    """`-dirty` says the code a run ran differs from its commit: results (reports/, data/, outputs/) and DVC's records
    (dvc.lock, sweeps/dvc.lock, which `dvc repro` rewrites) never make it so (65 runs said "code differed" for a
    rewritten sweeps/dvc.lock)."""
    import subprocess

    from swarmlab.paths import code_commit

    monkeypatch.delenv("SWARMLAB_GIT_COMMIT", raising=False)
    files = ["reports/t/metrics.json", "data/x.bin", "outputs/y", "dvc.lock", "sweeps/dvc.lock", "code.py"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=tmp_path, check=True)
    clean = code_commit(tmp_path)
    assert len(clean) == 40, clean
    for f in files[:-1]:
        (tmp_path / f).write_text("2\n")
    assert code_commit(tmp_path) == clean
    (tmp_path / "code.py").write_text("2\n")
    assert code_commit(tmp_path) == clean + "-dirty"


def test_seeds_make_one_run_per_model_and_seed_each_seeded_as_alone(tmp_path):
    """`tasks.<task>.seeds` trains every model under each seed: run names, folders and metrics carry the seed, and a
    seed's run starts from the same weights as that seed alone would."""
    import torch

    from swarmlab.drive.runs import Run, task_runs
    from pipelines.train import train

    section = {
        "task": "toy_counting",
        "models": ["transformer"],
        "model_overrides": {"d_model": 16, "num_layers": 1, "num_heads": 2},
        "train": {"max_epochs": 0, "max_steps": 2, "eval_every": 2},
        "options": {"seq_len": 8, "vocab_size": 5},
        "seeds": [3, 1],
    }
    params = params_with(counting=section)
    params["train"].update(device="cpu")
    assert task_runs(params, "counting") == [Run("transformer", 3), Run("transformer", 1)]
    kw = dict(report_root=tmp_path / "rep", tracking=False)
    metrics = train(params, "counting", out_root=tmp_path / "both", **kw)
    assert list(metrics) == ["transformer-seed3", "transformer-seed1"]
    assert [(m["model"], m["seed"]) for m in metrics.values()] == [("transformer", 3), ("transformer", 1)]
    alone = params_with(counting={**section, "seeds": [1]})
    alone["train"].update(device="cpu")
    train(alone, "counting", out_root=tmp_path / "alone", **kw)
    load = lambda root, run: torch.load(root / "counting" / run / "last.pt", weights_only=True)["model"]
    a, b = load(tmp_path / "both", "transformer-seed1"), load(tmp_path / "alone", "transformer-seed1")
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = load(tmp_path / "both", "transformer-seed3")
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        ([0, 0], "seeds lists a seed twice"),
        ([-1], "seeds must be integers from 0 to 4294967295"),
        (["a"], "seeds"),
    ],
)
def test_bad_seeds_are_one_line(seeds, message):
    from swarmlab.drive.runs import task_runs

    params = params_with(counting={"task": "toy_counting", "models": ["transformer"], "seeds": seeds})
    with pytest.raises(SwarmlabError, match=message):
        task_runs(params, "counting")


def test_a_profile_may_skip_a_task_and_its_stages_say_why(tmp_path):
    """`tasks.<task>.skip` makes train and evaluate write the reason as their result (and the outputs DVC expects),
    and train nothing."""
    import json

    from pipelines.evaluate import evaluate
    from pipelines.train import train

    reason = "its comparisons need the `claims` profile"
    params = params_with(counting={"task": "toy_counting", "models": ["transformer"], "skip": reason})
    kw = dict(report_root=tmp_path / "rep", tracking=False)
    assert train(params, "counting", out_root=tmp_path / "out", **kw) == {"skipped": reason}
    assert (tmp_path / "out" / "counting").is_dir() and not any((tmp_path / "out" / "counting").iterdir())
    assert (tmp_path / "rep" / "train" / "counting" / "history").is_dir()
    assert evaluate(params, "counting", train_root=tmp_path / "out", **kw) == {"skipped": reason}
    assert json.loads((tmp_path / "rep" / "evaluate" / "counting" / "metrics.json").read_text()) == {"skipped": reason}
    assert (tmp_path / "rep" / "evaluate" / "counting" / "plots").is_dir()
