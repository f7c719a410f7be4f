"""Sweeps without Ray: search spaces (constraints, generic spaces, one-line errors), input checks, bookkeeping."""

from __future__ import annotations

import copy
import json
import dataclasses
import itertools

import pytest
import torch.nn as nn

import models
from models.registry import _REGISTRY, register_model
from models.swarmformer import SwarmFormerConfig
from swarmlab.engine import TrainConfig
from swarmlab.errors import SwarmlabError
from swarmlab.drive.params import load_params, validate_all
from swarmlab.drive.sweep.search_space import resolve_space
from pipelines.sweep import main
from swarmlab.drive.schedule.cluster import check_reachable
from swarmlab.drive.sweep.spec import resolve_sweep
from swarmlab.drive.sweep.setup import model_space, trial_resources, trial_train_config
from tasks import get_task

from tests.pipelines.conftest import TINY_SPACE, free_port, write_params

TRAIN_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig))


class ImdbFacts(type(get_task("imdb"))):
    """The imdb task with its data's facts given here instead of read from a tokenized folder."""

    def __init__(self, seq_len: int = 768):
        super().__init__()
        self.data_seq_len = seq_len

    def model_kwargs(self) -> dict:
        return {"vocab_size": 30522, "num_classes": 2}

    def max_seq_len(self) -> int:
        return self.data_seq_len


IMDB = ImdbFacts()


def sweep_space(params: dict, model: str, task):
    """``model``'s space on ``task`` as the sweep resolves it (resolve_sweep, then model_space)."""
    spec = resolve_sweep(params, task.key, models=[model])
    return model_space(spec.model(model), task, spec.spaces)


def space_for(spaces: dict, model: str = "swarmformer_small", data_seq_len: int = 768, overrides=None):
    cfg = models.create_model(model, vocab_size=100, num_classes=2).cfg
    return resolve_space(
        {"imdb": spaces},
        "imdb",
        model,
        model_cfg=cfg,
        train_fields=TRAIN_FIELDS,
        check_train=lambda kw: TrainConfig(**kw),
        data_seq_len=data_seq_len,
        model_overrides=overrides,
    )


def test_seed_space_searches_only_divisible_cluster_seq_len_pairs():
    params = load_params(profile="paper")
    space = sweep_space(params, "swarmformer_small", IMDB)
    spec = params["sweep"]["spaces"]["imdb"]["swarmformer*"]
    joint = [d for d in space.dims if d.kind == "joint"]
    assert [d.fields for d in joint] == [("cluster_size", "seq_len")]
    pairs = {(v["cluster_size"], v["seq_len"]) for v in joint[0].decode.values()}
    expected = {(c, s) for c, s in itertools.product(spec["cluster_size"], spec["seq_len"]) if s % c == 0}
    assert pairs == expected and len(pairs) == 26
    kinds = {d.name: d.kind for d in space.dims}
    assert kinds == {
        "d_model": "choice",
        "num_layers": "choice",
        "t_local": "choice",
        "cluster_size|seq_len": "joint",
        "batch_size": "choice",
        "lr": "loguniform",
        "weight_decay": "loguniform",
        "dropout": "uniform",
    }
    assert (space.dims[-3].low, space.dims[-3].high) == (5.0e-5, 5.0e-4)


def test_every_joint_value_decodes_to_a_valid_model_config():
    space = space_for(load_params(profile="paper")["sweep"]["spaces"]["imdb"])
    joint = next(d for d in space.dims if d.kind == "joint")
    base = {d.name: (d.values[0] if d.values else d.low) for d in space.dims}
    for code in joint.values:
        train, model = space.split(space.decode({**base, joint.name: code}))
        SwarmFormerConfig(**model)  # raises on an invalid pair
        TrainConfig(**train)
        assert set(train) == {"batch_size", "lr", "weight_decay"}


def test_space_narrowed_to_short_data_factorises_and_reports_unusable_values():
    space = space_for(load_params(profile="cpu")["sweep"]["spaces"]["imdb"], data_seq_len=256)
    assert not [d for d in space.dims if d.kind == "joint"]  # every remaining pair divides
    cluster = next(d for d in space.dims if d.name == "cluster_size")
    assert cluster.values == [2, 4, 8, 16]
    assert any("cluster_size=12" in n for n in space.notes)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("model", models.list_models(kind="text"))
def test_every_text_model_gets_a_valid_space_in_every_profile(profile, model):
    params = load_params(profile=profile)
    space = sweep_space(params, model, ImdbFacts(params["tokenize"]["seq_len"]))
    assert space.dims
    cfg_fields = {f.name for f in dataclasses.fields(models.create_model(model, vocab_size=100, num_classes=2).cfg)}
    assert space.model_keys <= cfg_fields and space.train_keys <= TRAIN_FIELDS


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("model", models.list_models(kind="set"))
def test_every_set_model_gets_a_valid_clustering_space_in_every_profile(profile, model):
    from swarmlab.drive.runs import make_task

    params = load_params(profile=profile)
    space = sweep_space(params, model, make_task(params, "clustering_direct"))
    assert space.dims and space.source.startswith("sweep.spaces.clustering_direct.")
    cfg_fields = {f.name for f in dataclasses.fields(models.create_model(model).cfg)}
    assert space.model_keys <= cfg_fields and space.train_keys <= TRAIN_FIELDS


# What an image task's data folder would tell a model (no data is built here); a long-document task's facts come
# from its class and options (its vocabulary, its max_len).
IMAGE_FACTS = {"image_size": (1, 28, 28), "num_classes": 10}


def test_every_task_of_the_pipeline_has_a_sweep_stage():
    """Issue 37: every task that `dvc repro` trains can be tuned the same way (`sweep@<task>` in sweeps/dvc.yaml)."""
    from tests.conftest import REPO_ROOT
    from tests.e2e.test_dvc_truth import expand

    trained = {n.split("@")[1] for n in expand(REPO_ROOT / "dvc.yaml") if n.startswith("train@")}
    swept = {n.split("@")[1] for n in expand(REPO_ROOT / "sweeps" / "dvc.yaml") if n.startswith("sweep@")}
    assert trained == swept and len(trained) == 7


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("key", ["clustering_mog", "mnist", "fashion_mnist", "lra_text", "listops"])
def test_every_model_of_every_task_gets_a_space_whose_lr_spans_two_decades(profile, key, monkeypatch):
    """Each model a task trains resolves a space on it (its family's entry, or the task's `default`), and the
    learning rate is searched over at least a factor of 100, so that a model that did not learn in a trial is not
    declared untrainable (issue 37)."""
    from swarmlab.drive.runs import make_task

    params = load_params(profile=profile)
    task = make_task(params, key)
    if key in ("mnist", "fashion_mnist"):
        monkeypatch.setattr(task, "model_kwargs", lambda: dict(IMAGE_FACTS))
    if key in ("lra_text", "listops"):
        length = task.options.max_len
        facts = {"vocab_size": task.vocab_size, "num_classes": task.num_classes, "seq_len": length}
        monkeypatch.setattr(task, "model_kwargs", lambda: facts)
        monkeypatch.setattr(task, "max_seq_len", lambda: length)
    for model in params["tasks"][key]["models"]:
        space = sweep_space(params, model, task)
        assert space.source.startswith(f"sweep.spaces.{key}."), (model, space.source)
        lr = next(d for d in space.dims if d.name == "lr")
        assert lr.kind == "loguniform" and lr.high / lr.low >= 100 - 1e-9, (model, lr)


def test_clustering_direct_spaces_are_the_seeds_table_1():
    spaces = load_params(profile="paper")["sweep"]["spaces"]["clustering_direct"]
    architecture = lambda entry: {k: v for k, v in entry.items() if k != "lr"}  # noqa: E731 - the lr is ours (#37)
    assert architecture(spaces["swarm"]) == {
        "dim_hidden": [16, 32, 48, 64, 96, 128, 192],
        "n_iter": [2, 5, 10, 20],
        "num_layers": [1, 2],
    }
    assert spaces["set_transformer_isab"]["num_inds"] == [10, 20, 40, 60, 80]
    assert architecture(spaces["lstm*"]) == {"dim_hidden": [16, 32, 64, 128], "num_layers": [1, 2, 3]}


def test_a_task_sweeps_its_own_models_when_sweep_models_name_another_tracks():
    from swarmlab.drive.runs import make_task
    from swarmlab.drive.sweep.setup import configured_models

    params = load_params(profile="smoke")
    assert configured_models(params, "imdb", "text") == ["swarmformer_small"]
    direct = make_task(params, "clustering_direct")
    assert configured_models(params, direct.key, direct.model_kind) == params["tasks"]["clustering_direct"]["models"]
    assert [m.model for m in resolve_sweep(params, "clustering_direct").models] == params["tasks"]["clustering_direct"][
        "models"
    ]
    params["sweep"]["models"] = ["swarmformer_small", "swarm"]
    assert configured_models(params, direct.key, direct.model_kind) == ["swarm"]
    assert [m.model for m in resolve_sweep(params, "clustering_direct").models] == ["swarm"]
    params["sweep"]["models"] = ["swram"]
    with pytest.raises(SwarmlabError, match=r"unknown model 'swram'.*\(sweep.models\)"):
        configured_models(params, direct.key, direct.model_kind)


@dataclasses.dataclass
class ToyConfig:
    vocab_size: int = 100
    num_classes: int = 2
    d_model: int = 32
    num_heads: int = 4
    seq_len: int = 64
    dropout: float = 0.1

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")


class Toy(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)

    def forward(self, input_ids, attention_mask=None):
        return self.head(self.emb(input_ids).mean(1))


@pytest.fixture
def toy_model():
    @register_model(tags=("test",))
    def toy_sweep_model(**overrides):
        return Toy(ToyConfig(**overrides))

    yield "toy_sweep_model"
    _REGISTRY.remove("toy_sweep_model")


def test_a_model_without_its_own_space_gets_the_generic_one(toy_model):
    params = load_params(profile="paper")
    space = sweep_space(params, toy_model, IMDB)
    assert space.source == "sweep.spaces.imdb.default"
    assert space.dropped == ["num_layers"]  # the toy has no num_layers: dropped, not an error
    assert {d.name for d in space.dims} == {"d_model", "seq_len", "batch_size", "lr", "weight_decay", "dropout"}
    assert space.model_keys == {"d_model", "seq_len", "dropout"}


def test_generic_space_constraints_come_from_the_models_config(toy_model):
    spaces = {"default": {"d_model": [30, 32, 48], "num_heads": [3, 4], "lr": {"loguniform": [1.0e-4, 1.0e-3]}}}
    space = space_for(spaces, toy_model)
    joint = next(d for d in space.dims if d.kind == "joint")
    assert joint.fields == ("d_model", "num_heads")
    assert {(v["d_model"], v["num_heads"]) for v in joint.decode.values()} == {(30, 3), (32, 4), (48, 3), (48, 4)}


def test_train_model_overrides_are_the_base_of_every_trial():
    spaces = {"swarmformer*": {"lr": {"loguniform": [1.0e-4, 1.0e-3]}}}
    space = space_for(spaces, overrides={"dropout": 0.25, "not_a_field": 1})
    assert space.model_base == {"dropout": 0.25}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"d_model": []}, "empty list"),
        ({"d_model": [64, 64]}, "lists a value twice"),
        ({"lr": {"loguniform": [0.0, 1.0e-3]}}, "low must be > 0"),
        ({"lr": {"uniform": [1.0e-3, 1.0e-4]}}, "must be below high"),
        ({"lr": {"loguniform": ["5e-5", 1.0e-3]}}, "YAML reads the latter as a string"),
        ({"lr": {"normal": [0.0, 1.0]}}, "a distribution is one of"),
        ({"num_layers": {"int": [1.5, 3]}}, "bounds must be integers"),
        ({"d_modle": [64, 128]}, "has no config field 'd_modle'"),
        ({"vocab_size": [100, 200]}, "comes from the data"),
        ({"batch_size": [0, 32]}, "batch_size=0"),
        ({"dropout": {"uniform": [0.2, 1.5]}}, "dropout=1.5"),
        ({"d_model": 64}, "searches nothing"),
        ({"cluster_size": [3, 5], "seq_len": [64, 128]}, "admits no valid configuration"),
        ({"seq_len": [128, 1024], "cluster_size": [8]}, "tokenized to 768 tokens"),
    ],
)
def test_bad_space_is_one_line_error(spec, message):
    with pytest.raises(SwarmlabError, match=message) as info:
        space_for({"swarmformer*": spec})
    assert "\n" not in str(info.value)


def test_space_lookup_prefers_exact_name_then_pattern_then_default():
    spaces = {
        "swarmformer*": {"d_model": [16, 32]},
        "swarmformer_base": {"d_model": [64, 96]},
        "default": {"lr": {"loguniform": [1.0e-4, 1.0e-3]}},
    }
    assert space_for(spaces, "swarmformer_base").source.endswith(".swarmformer_base")
    assert space_for(spaces, "swarmformer_small").source.endswith(".swarmformer*")
    with pytest.raises(SwarmlabError, match="no search spaces for task"):
        resolve_space({}, "imdb", "swarmformer_small", model_cfg=SwarmFormerConfig(), train_fields=TRAIN_FIELDS)


def test_trials_train_with_the_sweeps_epochs_and_time_budget():
    params = load_params(profile="smoke")
    params["sweep"].update(max_epochs=3, time_budget_s=12.5)
    cfg = TrainConfig(**trial_train_config(params, "imdb"))
    assert (cfg.max_epochs, cfg.time_budget_s, cfg.seed) == (3, 12.5, params["seed"])
    assert cfg.batch_size == params["train"]["batch_size"] and cfg.eval_batch_size == params["evaluate"]["batch_size"]


def test_params_file_sweep_sections_validate():
    assert validate_all() == ["claims", "cpu", "paper", "smoke"]


def test_trial_resources_are_checked_against_the_largest_node():
    nodes = [
        {"Alive": True, "Resources": {"CPU": 2.0}},
        {"Alive": True, "Resources": {"CPU": 4.0, "GPU": 1.0}},
        {"Alive": False, "Resources": {"CPU": 64.0}},
    ]
    assert trial_resources(nodes, 4, 0.25) == {"cpu": 4, "gpu": 0.25}
    assert trial_resources(nodes, 1, 0) == {"cpu": 1}
    assert trial_resources(nodes[:1], 1, 0.5) == {"cpu": 1}  # no GPU anywhere: CPUs only
    with pytest.raises(SwarmlabError, match="would wait forever"):
        trial_resources(nodes, 8, 0)
    with pytest.raises(SwarmlabError, match="gpus_per_trial=2"):
        trial_resources(nodes, 1, 2)


def test_unreachable_address_fails_fast():
    with pytest.raises(SwarmlabError, match="cannot reach a Ray cluster"):
        check_reachable(f"127.0.0.1:{free_port()}", timeout_s=1.0)
    with pytest.raises(SwarmlabError, match="not host:port"):
        check_reachable("nowhere")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "imbd"], "unknown task 'imbd'; did you mean imdb?"),
        (["--models", "swarmformer_smal"], "unknown model 'swarmformer_smal'; did you mean swarmformer_small"),
        (["--search", "--address", "127.0.0.1:{port}"], "cannot reach a Ray cluster at 127.0.0.1:"),
        (["--search", "--params", "{bad_params}"], "admits no valid configuration of swarmformer_small"),
        (["--num-samples", "0"], "--num-samples must be >= 1"),
    ],
)
def test_cli_bad_input_is_one_line_error(args, message, tiny_data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    bad_space = copy.deepcopy(TINY_SPACE)
    bad_space["swarmformer*"]["cluster_size"] = [3, 5]  # divides neither 32 nor 64
    bad = write_params(tmp_path / "bad", bad_space)
    good = write_params(tmp_path / "good")
    args = [a.format(port=free_port(), bad_params=bad) for a in args]
    if "--params" not in args:
        args += ["--params", str(good)]
    with pytest.raises(SystemExit) as info:
        main(
            [
                "--profile",
                "smoke",
                "--data-dir",
                str(tiny_data),
                "--out-dir",
                str(tmp_path / "out"),
                "--report-dir",
                str(tmp_path / "rep"),
                "--no-tracking",
                *args,
            ]
        )
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2
    assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "rep").exists()


@pytest.mark.slow  # MLflow's import and store creation take seconds
def test_runs_of_trials_tune_never_recorded_are_closed(tmp_path):
    from mlflow.tracking import MlflowClient

    from swarmlab.tracking import MlflowTracker
    from swarmlab.drive.sweep.orphans import close_orphan_runs

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    parent = MlflowTracker("imdb-sweep", "sweep-x", uri=uri)
    kids = {
        t: MlflowTracker("imdb-sweep", t, parent_run_id=parent.run_id, uri=uri, tags={"ray_trial_id": t})
        for t in ("known", "orphan", "done")
    }
    kids["done"].finish()
    close_orphan_runs(uri, parent.run_id, {"known", "done"})
    client = MlflowClient(tracking_uri=uri)
    status = {t: client.get_run(k.run_id).info.status for t, k in kids.items()}
    assert status == {"known": "RUNNING", "orphan": "KILLED", "done": "FINISHED"}
    assert client.get_run(parent.run_id).info.status == "RUNNING"


def test_the_sweep_stage_of_a_pinned_task_records_the_pins_in_a_second(tmp_path):
    """`dvc repro` passes through sweep@<task> (train@ reads its chosen.json): under `tuning: pinned` it searches
    nothing, writes chosen.json and, where no search left them, the tables DVC expects; an earlier search's are kept."""
    from pipelines.sweep import main

    main(["--task", "clustering_direct", "--profile", "smoke", "--report-dir", str(tmp_path)])
    folder = tmp_path / "clustering_direct"
    assert json.loads((folder / "chosen.json").read_text()) == {
        "task": "clustering_direct",
        "profile": "smoke",
        "tuning": "pinned",
        "models": {},
    }
    assert "tuning` is `pinned`" in (folder / "summary.md").read_text()
    assert {p.name for p in folder.iterdir()} == {"chosen.json", "best_params.json", "summary.md", "summary.csv"}
    (folder / "summary.md").write_text("an earlier search\n")
    main(["--task", "clustering_direct", "--profile", "smoke", "--report-dir", str(tmp_path)])
    assert (folder / "summary.md").read_text() == "an earlier search\n"
