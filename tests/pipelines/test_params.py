import copy

import pytest
import yaml

from swarmlab.errors import SwarmlabError
from swarmlab.drive.params import load_params, validate_all
from swarmlab.drive.run_config import model_overrides, train_settings
from swarmlab.paths import PARAMS_FILE

BASE = """
profile: a
paths: {datasets: ../shared/datasets}
defaults:
  seed: 0
  train: {lr: 0.001, max_epochs: 2, amp: fp32, models: [m], model_overrides: {}}
profiles:
  a: {train: {max_epochs: 5}}
  b: {train: {lr: 1, model_overrides: {dropout: 0.1, anything: [1, 2]}}}
"""


def write(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_profile_merges_over_defaults(tmp_path):
    path = write(tmp_path, BASE)
    a = load_params(path)
    assert a["profile"] == "a" and a["train"]["max_epochs"] == 5 and a["train"]["lr"] == 0.001
    b = load_params(path, "b")
    assert b["train"]["lr"] == 1  # an int where a float is expected is fine
    assert b["train"]["model_overrides"] == {"dropout": 0.1, "anything": [1, 2]}  # free-form mapping
    assert validate_all(path) == ["a", "b"]


def test_top_level_section_overrides_every_profile(tmp_path):
    path = write(tmp_path, BASE + "train: {max_epochs: 9}\n")
    assert load_params(path, "a")["train"]["max_epochs"] == 9
    assert load_params(path, "b")["train"]["max_epochs"] == 9


@pytest.mark.parametrize(
    "profiles, message",
    [
        ("  a: {train: {lrr: 1.0}}", r"unknown key 'train.lrr'; known keys here: amp, lr, max_epochs"),
        ("  a: {trian: {}}", r"unknown key 'trian'"),
        ("  a: {train: {max_epochs: '3'}}", r"train.max_epochs must be a int .*got string '3'"),
        ("  a: {train: {amp: 1}}", r"train.amp must be a string"),
        ("  a: {train: {lr: fast}}", r"train.lr must be a float"),
        ("  a: {train: {models: m}}", r"train.models must be a list"),
    ],
)
def test_bad_params_are_one_line_errors(tmp_path, profiles, message):
    text = BASE.split("profiles:")[0] + "profiles:\n" + profiles + "\n"
    with pytest.raises(SwarmlabError, match=message) as info:
        load_params(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_unknown_profile_and_top_level_key(tmp_path):
    path = write(tmp_path, BASE)
    with pytest.raises(SwarmlabError, match=r"unknown profile 'gpu'; choose one of \['a', 'b'\]"):
        load_params(path, "gpu")
    with pytest.raises(SwarmlabError, match=r"unknown top-level key\(s\) \['trainn'\]"):
        load_params(write(tmp_path, BASE + "trainn: {}\n"))


def test_repo_params_resolve_for_every_profile():
    names = validate_all()
    assert {"smoke", "cpu", "paper"} <= set(names)
    paper = load_params(profile="paper")
    assert paper["train"]["batch_size"] == 48 and paper["train"]["lr"] == 4.74e-4
    assert paper["train"]["weight_decay"] == 0.0381 and paper["train"]["max_epochs"] == 20
    imdb = paper["tasks"]["imdb"]
    assert paper["train"]["patience"] == 5 and imdb["model_overrides"]["dropout"] == 0.4
    assert set(imdb["models"]) == {"swarmformer_small", "swarmformer_base"}
    # each model at its own column of the paper's Table 1, as the train stage resolves it
    columns = {"swarmformer_small": (96, 4.76e-4, 0.0541, 0.3), "swarmformer_base": (48, 4.74e-4, 0.0381, 0.4)}
    for model, column in columns.items():
        t = train_settings(paper, "imdb", model)
        assert (t["batch_size"], t["lr"], t["weight_decay"], model_overrides(paper, "imdb", model)["dropout"]) == column


def test_only_the_declared_sections_override_at_the_top_level(tmp_path):
    """A top-level section DVC stages do not declare would leave their results "up to date" when it changes."""
    text = BASE.replace("  train:", "  evaluate: {batch_size: 8}\n  train:")
    with pytest.raises(SwarmlabError, match=r"unknown top-level key\(s\) \['evaluate'\].*set evaluate under defaults"):
        load_params(write(tmp_path, text + "evaluate: {batch_size: 4}\n"))


def test_a_profile_may_add_engine_settings_per_model_mappings_and_task_fields(tmp_path):
    """tasks.<k>.train / model_overrides take keys the defaults' section omits (checked where they are used), a task
    section takes every TaskSection field (seeds, skip), and a grid's `vary` / `set` are replaced whole."""
    path = write(
        tmp_path,
        """
profile: a
paths: {datasets: ../shared/datasets}
defaults:
  seed: 0
  tasks:
    t: {models: [m], train: {lr: 0.001}, model_overrides: {d: 1}, options: {}}
  ablations:
    g: {task: t, vary: {tasks.t.train.lr: [1, 2]}, set: {}}
profiles:
  a:
    tasks: {t: {seeds: [0, 1], skip: why, train: {eval_every: 5, m: {lr: 0.1}}, model_overrides: {m: {d: 2}}}}
    ablations: {g: {vary: {tasks.t.model_overrides.d: [3]}, set: {tasks.t.seeds: [0]}}}
  b: {tasks: {t: {bogus: 1}}}
""",
    )
    a = load_params(path)
    t = a["tasks"]["t"]
    assert t["seeds"] == [0, 1] and t["skip"] == "why"
    assert t["train"] == {"lr": 0.001, "eval_every": 5, "m": {"lr": 0.1}} and t["model_overrides"] == {
        "d": 1,
        "m": {"d": 2},
    }
    assert a["ablations"]["g"]["vary"] == {"tasks.t.model_overrides.d": [3]}
    assert a["ablations"]["g"]["set"] == {"tasks.t.seeds": [0]}
    with pytest.raises(SwarmlabError, match="unknown key 'tasks.t.bogus'"):
        load_params(path, "b")


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys without a word, so the value further down would run unseen."""
    text = BASE.replace("  a: {train: {max_epochs: 5}}", "  a: {train: {max_epochs: 5}}\n  a: {train: {max_epochs: 7}}")
    with pytest.raises(SwarmlabError, match=r"params.yaml:9:3: not valid YAML: duplicate key 'a' \(first at line 8\)"):
        load_params(write(tmp_path, text))
    nested = BASE.replace("{lr: 0.001, max_epochs: 2,", "{lr: 0.001, max_epochs: 2, lr: 0.01,")
    with pytest.raises(SwarmlabError, match=r"duplicate key 'lr'"):
        load_params(write(tmp_path, nested))


@pytest.mark.parametrize(
    "seeds, message",
    [
        ([0, 2**32], r"seeds must be integers from 0 to 4294967295, got 4294967296"),
        ([1, 1], r"seeds lists a seed twice"),
    ],
)
def test_task_seeds_are_in_range_and_distinct(seeds, message):
    from swarmlab.drive.sections import seed, task_section

    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["imdb"]["seeds"] = seeds
    with pytest.raises(SwarmlabError, match=message):
        task_section(params, "imdb")
    params["seed"] = 10**20  # numpy and torch's generators refuse it later, with a traceback
    with pytest.raises(SwarmlabError, match=r"seed must be >= 0 and <= 4294967295"):
        seed(params)


def test_per_model_settings_must_name_a_model_that_fits_the_task():
    params = copy.deepcopy(load_params(profile="smoke"))
    params["tasks"]["imdb"]["train"] = {"lstm": {"lr": 1e-3}}  # a set model: it never runs on IMDB
    with pytest.raises(SwarmlabError, match=r"tasks.imdb.train.lstm holds settings for 'lstm', which cannot run"):
        train_settings(params, "imdb", "swarmformer_small")
    params["tasks"]["imdb"]["train"] = {"swarmformer_base": {"lr": 1e-3}}  # fits, though smoke does not train it
    assert train_settings(params, "imdb", "swarmformer_small")["lr"] != 1e-3
    params["tasks"]["imdb"]["model_overrides"] = {"set_linear*": {"dim_hidden": 4}}
    with pytest.raises(SwarmlabError, match=r"model_overrides.set_linear\* holds settings for 'set_linear\*'"):
        model_overrides(params, "imdb", "swarmformer_small")


@pytest.mark.parametrize(
    "paths, message",
    [
        ("{datasets: 123}", r"paths.datasets must be a folder path \(text\), got int 123"),
        ("{datasets: ''}", r"paths.datasets must be a folder path"),
        ("{dataset: x}", r"unknown key\(s\) \['dataset'\] under paths; known: datasets"),
        ("[x]", r"paths must be a mapping"),
    ],
)
def test_paths_are_checked(tmp_path, paths, message):
    text = BASE.replace("paths: {datasets: ../shared/datasets}", f"paths: {paths}")
    with pytest.raises(SwarmlabError, match=message):
        load_params(write(tmp_path, text))


def test_a_top_level_train_override_reaches_every_task_that_sets_the_key_itself(tmp_path):
    """`dvc exp run -S +train.lr=...` (docs/pipeline.md): each task's own `tasks.<k>.train.lr` used to win, so the
    override reached one task of seven."""
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    before = load_params(profile="cpu")
    own = [k for k, s in before["tasks"].items() if "lr" in (s.get("train") or {})]
    assert own, "the test needs a task that sets its own lr"
    raw["train"] = {"lr": 1.234e-4}
    after = load_params(write(tmp_path, yaml.safe_dump(raw)), "cpu")
    for key in after["tasks"]:
        for model in after["tasks"][key]["models"]:
            assert train_settings(after, key, model)["lr"] == 1.234e-4, (key, model)


def test_params_yaml_survives_dvcs_own_round_trip():
    """`dvc exp run -S` rewrites params.yaml with ruamel (#38): the file is laid out so that DVC's round trip is the
    identity, and a `-S` changes the lines it sets and no others (it used to rewrap 682 lines)."""
    import difflib

    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml_for_update

    text = PARAMS_FILE.read_text()
    assert dumps_yaml(parse_yaml_for_update(text, "params.yaml")) == text
    data = parse_yaml_for_update(text, "params.yaml")
    data["train"]["lr"] = 0.0003  # -S +train.lr=3e-4
    data["profile"] = "smoke"  # -S profile=smoke
    changed = [
        ln
        for ln in difflib.unified_diff(text.splitlines(), dumps_yaml(data).splitlines(), lineterm="", n=0)
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    assert changed == ["-profile: cpu", "+profile: smoke", "-train: {}", "+train:", "+  lr: 0.0003"], changed
