"""The schema of params.yaml: one dataclass per section, each setting with its allowed values beside its
default (``swarmlab.settings.setting``). A stage asks for the sections it reads with ``section(params,
name)`` before it reads any data or touches any output; a refused value is one line naming the key, the
value, what is allowed and the params file.

The engine's section, ``train``, is ``swarmlab.engine.TrainConfig`` (checked per task, with
``tasks.<key>.train`` on top, by ``swarmlab.drive.run_config.train_config``); a task's options are its own
``Options`` dataclass (``tasks/base.py``); a model's config is its config dataclass. All of them are checked
the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from swarmlab.errors import SwarmlabError
from swarmlab.settings import MAX_SEED, SettingsError, check, check_value, models_twice, parse, setting
from tasks import list_tasks


@dataclass
class PrepareConfig:
    source: str = ""  # "" = <datasets>/imdb (parquet); or a path to aclImdb/ or aclImdb_v1.tar.gz
    val_fraction: float = setting(0.1, gt=0, lt=1)  # stratified validation split carved from the official train split
    max_train: int = setting(0, ge=0)  # keep at most this many training reviews (stratified); 0 = all
    max_test: int = setting(0, ge=0)  # 0 = the whole official test split
    shards: int = setting(2, ge=1, le=1000)  # parquet shards per split

    def __post_init__(self):
        check(self, "prepare")


@dataclass
class TokenizeConfig:
    vocab: str = "bert_vocab/bert-base-uncased-vocab.txt"  # relative to paths.datasets
    seq_len: int = setting(256, ge=2, le=65536)  # [CLS] + tokens + [SEP], padded/truncated to this

    def __post_init__(self):
        check(self, "tokenize")


@dataclass
class EvaluateConfig:
    batch_size: int = setting(256, ge=1)  # rows per inference batch (also the validation batch of training)
    warmup_batches: int = setting(2, ge=0, le=1000)  # untimed batches before the latency measurement

    def __post_init__(self):
        check(self, "evaluate")


@dataclass
class TaskSection:
    """``tasks.<key>``: what one task of the pipeline trains, and how."""

    models: list[str] = setting([])  # registered models of the task's kind
    model_overrides: dict = setting({})  # config fields for every model of the task
    train: dict = setting({})  # engine settings (TrainConfig fields) that differ from `train` for this task
    evaluate: dict = setting({})  # `evaluate` settings that differ for this task (a smaller batch at 4k tokens)
    options: dict = setting({})  # the task's own settings (its Options dataclass)
    task: str = ""  # the registered task this section runs; "" = the section's own name
    seeds: list[int] = setting([])  # every model trains (and is tested) once per seed; [] = the top-level `seed` alone
    # Why this profile does not train or test the task ("" = it does): a profile whose budget cannot decide the task's
    # comparisons says so here, and train@/evaluate@ write that reason as their result instead of noise.
    skip: str = ""
    # How the models' settings are chosen (swarmlab/drive/tuning.py): "pinned" = as written here; "sweep" = each model's
    # by its sweep on validation (reports/sweep/<key>/chosen.json, a dependency of train@, evaluate@ and sample@)
    tuning: str = setting("pinned", choices=("pinned", "sweep"))
    # Whether dvc.yaml runs the task: its task lists (train@, evaluate@, derive@/data@, sample@, sweep@) are generated
    # from the sections that say true (python -m swarmlab.drive.dvcdeps); false for a template or bring-your-own-data task
    pipeline: bool = True

    def __post_init__(self):
        check(self, "tasks.<key>")
        if not self.models:
            raise ValueError("models is empty: list at least one registered model")
        bad = [s for s in self.seeds if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED]
        if bad:
            raise ValueError(f"seeds must be integers from 0 to {MAX_SEED}, got {bad[0]!r}")
        if models_twice(self.models, "models"):
            raise ValueError(models_twice(self.models, "models"))
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds lists a seed twice: {self.seeds}")


@dataclass
class SweepConfig:
    models: list[str] = setting(["swarmformer_small"])  # one Tune experiment per model; `all` = every fitting model
    num_samples: int = setting(12, ge=1)  # trials per model
    max_concurrent: int = setting(2, ge=0)  # trials at once; 0 = as many as the resources allow
    cpus_per_trial: float = setting(1, gt=0)  # must fit on one node (checked against the cluster)
    gpus_per_trial: float = setting(1.0, ge=0)  # used only where the cluster has GPUs; a fraction shares one
    max_epochs: int = setting(4, ge=0)  # per trial, when > 0 (else the task's)
    max_steps: int = setting(0, ge=0)  # per trial, when > 0 (else the task's)
    time_budget_s: float = setting(0.0, ge=0)  # net training seconds per trial; 0 = none
    trial_timeout_s: float = setting(0.0, ge=0)  # wall-clock seconds per trial; 0 = none
    sweep_timeout_s: float = setting(0.0, ge=0)  # wall-clock limit of each model's sweep; 0 = none
    grace_period: int = setting(1, ge=1)  # ASHA: evaluations every trial runs before it may be stopped
    reduction_factor: int = setting(3, ge=2)  # ASHA: the top 1/reduction_factor of each rung continue
    startup_trials: int = setting(10, ge=0)  # TPE: random trials before the model-based proposals
    max_failures: int = setting(2, ge=0)  # restarts of a crashed trial from its last checkpoint
    # a model's choice counts (chosen.json) only if every finished trial trained past its warmup steps; else the sweep
    # fails after writing its tables (amendment A5: an lr judged within warmup is the machine's verdict, not the model's)
    past_warmup: bool = False
    seed: int = setting(0, ge=0, le=MAX_SEED)  # the searcher's seed
    address: str = ""  # "" = a local Ray instance; else a cluster
    spaces: dict = setting({})  # per task, per model; checked by swarmlab.drive.sweep.search_space

    def __post_init__(self):
        check(self, "sweep")


@dataclass
class AugmentConfig:
    """``augment:``. Defaults are the paper's authors' values where they have one."""

    enabled: bool = True  # false: train copied through unchanged (the with/without ablation)
    seed_offset: int = setting(1, ge=0)  # augmentation seed = seed + seed_offset (prepare's shuffle uses `seed`)
    shuffle_fraction: float = setting(
        0.3, ge=0, le=1
    )  # share of train reviews given a sentence-shuffled copy (authors: 0.3)
    keep_pair_p: float = setting(0.7, ge=0, le=1)  # chance a sentence stays glued to the next one (authors: 0.7)
    synonym_fraction: float = setting(0.3, ge=0, le=1)  # share of train reviews given a synonym copy (authors: 0.3)
    word_rate: float = setting(0.1, ge=0, le=1)  # share of a review's words replaced (authors: 0.1)
    synonym_senses: int = setting(3, ge=1)  # synonyms from at most this many WordNet senses (authors: any sense) ...
    sense_share: float = setting(0.5, ge=0, le=1)  # ... each with >= this share of the top sense's SemCor count
    combo_fraction: float = setting(
        0.25, ge=0, le=10
    )  # combo rows = this share of the train split (authors: a quarter)
    combo_min: int = setting(2, ge=2)  # reviews joined per combo: combo_min..combo_max (authors: 2-3)
    combo_max: int = setting(3, ge=2)
    workers: int = setting(2, ge=1, le=256)  # processes; the output is identical for any value

    def __post_init__(self):
        check(self, "augment")
        if self.combo_min > self.combo_max:
            raise SettingsError(f"augment.combo_min ({self.combo_min}) must be <= augment.combo_max ({self.combo_max})")


@dataclass
class SampleConfig:
    """``sample:``, the sample@<task> stage's settings."""

    num_samples: int = setting(100, ge=1, le=100_000)  # per model; image generation: num_samples // classes per class
    temperature: float = setting(1.0, gt=0)  # logits / temperature
    num_threads: int = setting(1, ge=0, le=1024)  # torch threads while sampling; 0 = torch's default

    def __post_init__(self):
        check(self, "sample")


SECTIONS = {
    "prepare": PrepareConfig,
    "augment": AugmentConfig,
    "tokenize": TokenizeConfig,
    "evaluate": EvaluateConfig,
    "sweep": SweepConfig,
    "sample": SampleConfig,
}


def source_of(params: dict) -> str:
    """Where ``params`` came from, for messages: the file and the profile."""
    file = params.get("params_file") or "params.yaml"
    return f"{file}, profile {params.get('profile')!r}"


def section(params: dict, name: str):
    """The checked dataclass of section ``name`` (``prepare``, ``augment``, ``tokenize``, ``evaluate``, ``sweep``,
    ``sample``; the engine's ``train`` is checked per task by ``swarmlab.drive.run_config.train_config``)."""
    try:
        return parse(SECTIONS[name], params.get(name), name)
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None


def seed(params: dict) -> int:
    try:
        check_value("seed", params.get("seed"), int, {"ge": 0, "le": MAX_SEED})
    except SettingsError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None
    return params["seed"]


def task_section(params: dict, key: str) -> TaskSection:
    """The checked ``tasks.<key>`` (its options, engine settings and models are checked where they are used)."""
    sections = params.get("tasks") or {}
    if key not in sections:
        known = ", ".join(sorted(sections)) or "none"
        raise SwarmlabError(
            f"no section tasks.{key} in params.yaml (sections: {known}; registered tasks: {', '.join(list_tasks())})"
        )
    try:
        return parse(TaskSection, sections[key], f"tasks.{key}")
    except SwarmlabError as exc:
        raise SwarmlabError(f"{exc} ({source_of(params)})") from None


ENV = {  # environment variables the project reads, and what they accept
    "SWARMLAB_PROGRESS": ("0", "1"),
    "SWARMLAB_TRACEBACK": ("0", "1"),
}


def check_environment() -> None:
    """One line for an environment variable the project reads with a value it does not accept."""
    for name, allowed in ENV.items():
        value = os.environ.get(name)
        if value not in (None, "") and value not in allowed:
            raise SwarmlabError(f"environment variable {name}={value!r}: use one of {', '.join(allowed)} (or unset it)")
    workdir = os.environ.get("SWARMLAB_WORKDIR")
    if workdir and os.path.exists(workdir) and not os.path.isdir(workdir):
        raise SwarmlabError(f"SWARMLAB_WORKDIR={workdir} is a file, not a folder: point it at a folder (it is created)")
