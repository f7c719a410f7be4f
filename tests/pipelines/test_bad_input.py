"""Bad input never costs a good run: every case is one line on stderr (`error: ...`, exit 2) naming the culprit,
and every output of an earlier good run is byte-identical afterwards. Then kill -9 of every stage mid-write,
and a rerun that succeeds with nothing left behind.

One good tiny pipeline (prepare -> augment -> tokenize -> train -> evaluate) is run once for the module; each
case runs one stage as a user would (a subprocess with its own params file, environment or damaged input),
restores what it damaged, and compares the whole work folder with the good run's snapshot.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from tests.conftest import REPO_ROOT, SHARED_DATASETS, held_before_swap, stage_module, write_parquet_folder

pytestmark = pytest.mark.slow  # ~60 Python processes


def base_params(source: Path) -> dict:
    return {
        "profile": "t",
        "paths": {"datasets": str(SHARED_DATASETS)},
        "defaults": yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["defaults"],
        "profiles": {
            "t": {
                "prepare": {"source": str(source), "max_train": 0},
                "tokenize": {"seq_len": 32},
                "augment": {"workers": 1},
                "tasks": {"imdb": {"model_overrides": {"seq_len": 32, "d_model": 16, "cluster_size": 4}}},
                "train": {"max_epochs": 1, "batch_size": 8, "device": "cpu"},
                "evaluate": {"batch_size": 16, "warmup_batches": 1},
            }
        },
    }


def run(stage: str, root: Path, params, *args, env=None, profile=True, timeout=300):
    path = root / "case.yaml"
    path.write_text(params if isinstance(params, str) else yaml.safe_dump(params))
    full_env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(root),
        "OMP_NUM_THREADS": "1",
        "SWARMLAB_PROGRESS": "0",
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlruns.db'}",
        **(env or {}),
    }
    if "SWARMLAB_DATASETS" not in (env or {}):
        full_env.pop("SWARMLAB_DATASETS", None)
    cmd = [
        sys.executable,
        "-m",
        *stage_module(stage),
        "--params",
        str(path),
        *(["--profile", "t"] if profile else []),
        *args,
    ]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


def snapshot(root: Path) -> dict[str, str]:
    """Every file (hidden ones too) under the stages' outputs, with its content hash."""
    out = {}
    for top in ("data", "outputs", "reports"):
        for p in sorted((root / top).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    params = base_params(write_parquet_folder(root / "src", 12))
    for stage, extra in (
        ("prepare", ()),
        ("augment", ()),
        ("tokenize", ()),
        ("train", ("--no-tracking",)),
        ("evaluate", ("--no-tracking",)),
    ):
        proc = run(stage, root, params, *extra)
        assert proc.returncode == 0, (stage, proc.stderr[-3000:])
    return root, params, snapshot(root)


# ------------------------------------------------------------------------------------------------ the cases


def setp(path: str, value):
    """A mutator setting ``profiles.t.<path>`` (or a top-level path starting with ``/``)."""

    def mutate(raw):
        keys = path.lstrip("/").split(".") if path.startswith("/") else ["profiles", "t", *path.split(".")]
        node = raw
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        return raw

    return mutate


def rerecorded(damage):
    """``damage``, then the damaged file's new size and hash written into its folder's meta.json, as if the data
    stage had built it: the case reaches the checks behind the hash."""
    from swarmlab.integrity import file_sha256

    def apply(path: Path):
        damage(path)
        meta_path = path.parent / "meta.json"
        meta = json.loads(meta_path.read_text())
        for files in meta["files"].values():
            if path.name in files:
                files[path.name] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        meta_path.write_text(json.dumps(meta))

    return apply


def delete_profile_key(raw):
    raw.pop("profile")
    return raw


def yaml_syntax_error(raw):
    return yaml.safe_dump(raw) + "profiles:\n  t: {train: {lr: [0.1}\n"


def rewrite_parquet(path: Path, change) -> None:
    table = pq.read_table(path)
    pq.write_table(change(table), path)


def set_first(column: str, value):
    def change(table):
        values = table.column(column).to_pylist()
        values[0] = value
        return table.set_column(
            table.column_names.index(column), column, pa.array(values, table.schema.field(column).type)
        )

    return change


def token_id_above_vocab(table):
    ids = table.column("input_ids").to_pylist()
    ids[3] = [40000] + ids[3][1:]
    return table.set_column(
        table.column_names.index("input_ids"), "input_ids", pa.array(ids, table.schema.field("input_ids").type)
    )


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TRAIN_DIR = "outputs/train/imdb/swarmformer_small-seed0"

# (id, stage, params mutation, extra args, env, file to damage, damage, expected fragment of the one line)
CASES = [
    # settings: ranges, types, choices
    (
        "grad_clip<0",
        "train",
        setp("train.grad_clip", -1.0),
        (),
        {},
        None,
        None,
        "train.grad_clip must be >= 0, got -1.0",
    ),
    ("patience<0", "train", setp("train.patience", -1), (), {}, None, None, "train.patience must be >= 0, got -1"),
    ("weight_decay<0", "train", setp("train.weight_decay", -0.5), (), {}, None, None, "train.weight_decay must be"),
    (
        "lr nan",
        "train",
        setp("train.lr", float("nan")),
        (),
        {},
        None,
        None,
        "train.lr must be a finite number > 0, got nan",
    ),
    (
        "lr inf",
        "train",
        setp("train.lr", float("inf")),
        (),
        {},
        None,
        None,
        "train.lr must be a finite number > 0, got inf",
    ),
    ("lr as text", "train", setp("train.lr", "fast"), (), {}, None, None, "train.lr must be a float"),
    (
        "batch > split",
        "train",
        setp("train.batch_size", 10**8),
        (),
        {},
        None,
        None,
        "is larger than the training split",
    ),
    ("threads<0", "train", setp("train.num_threads", -2), (), {}, None, None, "train.num_threads must be >= 0, got -2"),
    (
        "cuda on cpu",
        "train",
        setp("train.device", "cuda"),
        (),
        {},
        None,
        None,
        "train.device 'cuda' but this machine has",
    ),
    ("bad device", "train", setp("train.device", "tpu9"), (), {}, None, None, "train.device 'tpu9' is not a device"),
    ("amp half", "train", setp("train.amp", "half"), (), {}, None, None, "amp must be one of fp32, bf16, auto"),
    (
        "plateau",
        "train",
        setp("train.plateau", "wait"),
        (),
        {},
        None,
        None,
        "train.plateau must be one of stop, backtrack",
    ),
    ("epochs text", "train", setp("train.max_epochs", "3"), (), {}, None, None, "train.max_epochs must be a int"),
    ("never ends", "train", setp("train.max_epochs", 0), (), {}, None, None, "training would never end"),
    (
        "task train lr 0",
        "train",
        setp("tasks.imdb.train", {"lr": 0}),
        (),
        {},
        None,
        None,
        "tasks.imdb.train.lr must be > 0, got 0",
    ),
    (
        "task train key",
        "train",
        setp("tasks.imdb.train", {"learning_rate": 0.1}),
        (),
        {},
        None,
        None,
        "tasks.imdb.train: unknown key(s) 'learning_rate'",
    ),
    (
        "unknown model",
        "train",
        setp("tasks.imdb.models", ["swarmformer_smal"]),
        (),
        {},
        None,
        None,
        "unknown model 'swarmformer_smal'; did you mean swarmformer_small",
    ),
    ("good,bogus", "train", None, ("--models", "swarmformer_small,bogus"), {}, None, None, "unknown model 'bogus'"),
    (
        "model of another kind",
        "train",
        setp("tasks.imdb.models", ["swarm"]),
        (),
        {},
        None,
        None,
        "model 'swarm' takes 'set' inputs but task 'imdb'",
    ),
    (
        "3 classes for 2",
        "train",
        setp("tasks.imdb.model_overrides", {"seq_len": 32, "d_model": 16, "cluster_size": 4, "num_classes": 3}),
        (),
        {},
        None,
        None,
        "tasks.imdb.model_overrides.num_classes=3 contradicts the data",
    ),
    (
        "model config",
        "train",
        setp("tasks.imdb.model_overrides", {"seq_len": 32, "d_model": 16, "cluster_size": 5}),
        (),
        {},
        None,
        None,
        "seq_len=32 is not divisible by cluster_size=5",
    ),
    (
        "unknown option",
        "train",
        setp("tasks.imdb.options", {"data_dir": "data/tokenized", "colour": 1}),
        (),
        {},
        None,
        None,
        "unknown key 'tasks.imdb.options.colour'",
    ),
    (
        "no data",
        "train",
        setp("tasks.imdb.options", {"data_dir": "data/nothing"}),
        (),
        {},
        None,
        None,
        "data/nothing/meta.json is missing",
    ),
    ("unknown task", "train", None, ("--task", "imbd"), {}, None, None, "unknown task 'imbd'; did you mean imdb?"),
    ("resume+restart", "train", None, ("--resume", "--restart"), {}, None, None, "--resume and --restart contradict"),
    ("no profile key", "train", delete_profile_key, (), {}, None, None, "has no `profile:` key"),
    ("yaml syntax", "train", yaml_syntax_error, (), {}, None, None, "case.yaml:"),
    (
        "top-level evaluate",
        "train",
        setp("/evaluate", {"batch_size": 4}),
        (),
        {},
        None,
        None,
        "unknown top-level key(s) ['evaluate']",
    ),
    ("unknown key", "train", setp("train.learning_rate", 0.1), (), {}, None, None, "unknown key 'train.learning_rate'"),
    (
        "negative seed",
        "prepare",
        setp("/defaults.seed", -1),
        (),
        {},
        None,
        None,
        "seed must be >= 0 and <= 4294967295, got -1",
    ),
    (
        "max_test<0",
        "prepare",
        setp("prepare.max_test", -5),
        (),
        {},
        None,
        None,
        "prepare.max_test must be >= 0, got -5",
    ),
    (
        "val_fraction",
        "prepare",
        setp("prepare.val_fraction", 1.5),
        (),
        {},
        None,
        None,
        "prepare.val_fraction must be > 0",
    ),
    (
        "word_rate",
        "augment",
        setp("augment.word_rate", 2.0),
        (),
        {},
        None,
        None,
        "augment.word_rate must be >= 0 and <= 1",
    ),
    ("combo min>max", "augment", setp("augment.combo_min", 4), (), {}, None, None, "augment.combo_max (3)"),
    (
        "seq_len 1",
        "tokenize",
        setp("tokenize.seq_len", 1),
        (),
        {},
        None,
        None,
        "tokenize.seq_len must be >= 2 and <= 65536, got 1",
    ),
    ("eval batch 0", "evaluate", setp("evaluate.batch_size", 0), (), {}, None, None, "evaluate.batch_size must be"),
    (
        "sweep inf bound",
        "sweep",
        setp("/defaults.sweep.spaces.imdb.swarmformer*.lr", {"loguniform": [1.0e-4, float("inf")]}),
        ("--no-tracking",),
        {},
        None,
        None,
        "bounds must be finite numbers",
    ),
    (
        "sweep samples",
        "sweep",
        setp("sweep.num_samples", 0),
        ("--no-tracking",),
        {},
        None,
        None,
        "sweep.num_samples must be >= 1, got 0",
    ),
    # environment
    (
        "tracking down",
        "train",
        None,
        (),
        {"MLFLOW_TRACKING_URI": "http://127.0.0.1:{port}"},
        None,
        None,
        "no MLflow server answers at http://127.0.0.1:",
    ),
    ("tracking no scheme", "evaluate", None, (), {"MLFLOW_TRACKING_URI": "nonsense"}, None, None, "is a file store"),
    ("progress=maybe", "train", None, (), {"SWARMLAB_PROGRESS": "maybe"}, None, None, "SWARMLAB_PROGRESS='maybe'"),
    (
        "datasets missing",
        "prepare",
        setp("prepare.source", ""),
        (),
        {"SWARMLAB_DATASETS": "/no/such/folder"},
        None,
        None,
        "datasets folder /no/such/folder does not exist",
    ),
    # data checked where it is read
    (
        "damaged tokenized",
        "train",
        None,
        ("--no-tracking",),
        {},
        "data/tokenized/train-001.parquet",
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        "train-001.parquet",
    ),
    (
        "id above vocab (re-recorded)",
        "train",
        None,
        ("--no-tracking",),
        {},
        "data/tokenized/train-000.parquet",
        rerecorded(lambda p: rewrite_parquet(p, token_id_above_vocab)),
        "row 3: token id 40000 outside the vocabulary of 30522",
    ),
    (
        "meta vocab small",
        "train",
        None,
        ("--no-tracking",),
        {},
        "data/tokenized/meta.json",
        lambda p: p.write_text(p.read_text().replace('"vocab_size": 30522', '"vocab_size": 100')),
        "outside the vocabulary of 100",
    ),
    (
        "label 5 (re-recorded)",
        "train",
        None,
        ("--no-tracking",),
        {},
        "data/tokenized/val-000.parquet",
        rerecorded(lambda p: rewrite_parquet(p, set_first("label", 5))),
        "val-000.parquet row 0: label 5 outside 0..1",
    ),
    (
        "random bytes val",
        "tokenize",
        None,
        (),
        {},
        "data/augmented/val-000.parquet",
        lambda p: p.write_bytes(os.urandom(512)),
        "val-000.parquet",
    ),
    (
        "prepared val junk (re-recorded)",
        "augment",
        None,
        (),
        {},
        "data/prepared/val-000.parquet",
        rerecorded(lambda p: p.write_bytes(os.urandom(512))),
        "cannot read",
    ),
    (
        "tokenized shard edited",
        "train",
        None,
        (),
        {},
        "data/tokenized/val-000.parquet",
        lambda p: rewrite_parquet(p, lambda t: set_first("label", 1 - t.column("label")[0].as_py())(t)),
        "val-000.parquet",
    ),
    (
        "test shard over a train shard",
        "train",
        None,
        (),
        {},
        "data/tokenized/train-000.parquet",
        lambda p: p.write_bytes((p.parent / "test-000.parquet").read_bytes()),
        "train-000.parquet has",
    ),
    (
        "test shard over a train shard (re-recorded)",
        "train",
        None,
        (),
        {},
        "data/tokenized/train-000.parquet",
        rerecorded(lambda p: p.write_bytes((p.parent / "test-000.parquet").read_bytes())),
        "of the test split",
    ),
    (
        "prepared meta rows edited",
        "augment",
        None,
        (),
        {},
        "data/prepared/meta.json",
        lambda p: p.write_text(
            json.dumps(
                {
                    **(m := json.loads(p.read_text())),
                    "splits": {**m["splits"], "train": {**m["splits"]["train"], "rows": 1}},
                }
            )
        ),
        "says the train split has 1 rows",
    ),
    (
        "empty review (re-recorded)",
        "augment",
        None,
        (),
        {},
        "data/prepared/test-000.parquet",
        rerecorded(lambda p: rewrite_parquet(p, set_first("text", "   "))),
        "test-000.parquet row 0: an empty review text",
    ),
    (
        "null review (re-recorded)",
        "augment",
        None,
        (),
        {},
        "data/prepared/train-000.parquet",
        rerecorded(lambda p: rewrite_parquet(p, set_first("text", None))),
        "train-000.parquet row 0: no review text",
    ),
    # checkpoints
    (
        "truncated checkpoint",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/best.pt",
        lambda p: p.write_bytes(p.read_bytes()[:1000]),
        "best.pt is damaged or not a torch checkpoint",
    ),
    (
        "foreign checkpoint",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/best.pt",
        lambda p: torch.save({"w": torch.zeros(2)}, p),
        "does not fit SwarmFormer",
    ),
    (
        "unsafe pickle",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/best.pt",
        lambda p: torch.save({"x": Evil()}, p),
        "was refused: it holds objects other than tensors",
    ),
    # settings that cannot do what they say (issue 39)
    ("seed too large", "train", setp("seed", 10**20), (), {}, None, None, "seed must be >= 0 and <= 4294967295"),
    (
        "duplicate yaml key",
        "train",
        lambda raw: yaml.safe_dump(raw) + "profile: t\n",
        (),
        {},
        None,
        None,
        "not valid YAML: duplicate key 'profile'",
    ),
    ("budget 1e-9 s", "train", setp("train.time_budget_s", 1e-9), (), {}, None, None, "is under 1 s"),
    (
        "eval_every past max_steps",
        "train",
        setp("train", {"max_epochs": 1, "max_steps": 1, "eval_every": 4, "batch_size": 8, "device": "cpu"}),
        (),
        {},
        None,
        None,
        "train.eval_every is 4, but the run stops after 1 step(s)",
    ),
    (
        "warm-up absurd",
        "evaluate",
        setp("evaluate.warmup_batches", 10**6),
        ("--no-tracking",),
        {},
        None,
        None,
        "evaluate.warmup_batches must be >= 0 and <= 1000, got 1000000",
    ),
    (
        "models twice",
        "train",
        setp("tasks.imdb.models", ["swarmformer_small", "swarmformer_small"]),
        (),
        {},
        None,
        None,
        "models lists swarmformer_small twice",
    ),
    (
        "--models twice",
        "train",
        None,
        ("--models", "swarmformer_small,swarmformer_small"),
        {},
        None,
        None,
        "--models lists swarmformer_small twice",
    ),
    (
        "per-model train of another kind",
        "train",
        setp("tasks.imdb.train", {"lstm": {"lr": 1e-3}}),
        (),
        {},
        None,
        None,
        "tasks.imdb.train.lstm holds settings for 'lstm', which cannot run on this task",
    ),
    # a result names the model that made it (issue 39)
    (
        "run.json of another run",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/run.json",
        lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "model": "swarmformer_base"})),
        "holds a run of model 'swarmformer_base', seed 0, task 'imdb', not swarmformer_small seed 0 on imdb",
    ),
    (
        "run.json of another config",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/run.json",
        lambda p: p.write_text(
            json.dumps({**(r := json.loads(p.read_text())), "model_cfg": {**r["model_cfg"], "d_model": 32}})
        ),
        "was trained with another SwarmFormerConfig than the params give now (differs in d_model)",
    ),
    (
        "run.json missing",
        "evaluate",
        None,
        ("--no-tracking",),
        {},
        f"{TRAIN_DIR}/run.json",
        lambda p: p.unlink(),
        "run.json is missing",
    ),
    # resume
    (
        "resume, lr changed",
        "train",
        setp("train.lr", 3.0e-4),
        ("--resume", "--no-tracking"),
        {},
        None,
        None,
        "--resume refused",
    ),
    (
        "resume, dropout changed",
        "train",
        setp("tasks.imdb.model_overrides", {"seq_len": 32, "d_model": 16, "cluster_size": 4, "dropout": 0.3}),
        ("--resume", "--no-tracking"),
        {},
        None,
        None,
        "model.dropout 0.4 -> 0.3",
    ),
]


@pytest.mark.parametrize(
    ("case", "stage", "mutate", "args", "env", "target", "damage", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_and_costs_nothing(good, case, stage, mutate, args, env, target, damage, fragment):
    root, params, before = good
    raw = mutate(copy.deepcopy(params)) if mutate else params
    env = {k: v.format(port=free_port()) for k, v in env.items()}
    original = (root / target).read_bytes() if target else None
    meta = (root / target).parent / "meta.json" if target else None  # a re-recorded case rewrites it
    original_meta = meta.read_bytes() if meta and meta.is_file() else None
    if damage:
        damage(root / target)
    try:
        proc = run(stage, root, raw, *args, env=env, profile=case != "no profile key")
    finally:
        if target:
            (root / target).write_bytes(original)
        if original_meta is not None:
            meta.write_bytes(original_meta)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln and "warn(" not in ln]
    assert proc.returncode == 2, (case, proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, (case, proc.stderr)
    assert fragment in lines[0], (case, fragment, lines[0])
    assert "pwned" not in proc.stdout
    assert snapshot(root) == before, f"{case}: the good run's outputs changed"


def test_a_table_of_at_least_40_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


def test_read_only_output_folder_is_one_line(good, tmp_path):
    """A folder the stage cannot write (chmod 555; as root, whom permissions do not stop, /sys)."""
    root, params, _ = good
    if os.geteuid() != 0:
        target = tmp_path / "ro"
        (target / "data").mkdir(parents=True)
        (target / "data").chmod(0o555)
    else:
        target = Path("/sys/swarmlab-test")
    proc = run("prepare", root, params, env={"SWARMLAB_WORKDIR": str(target)})
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: cannot write"), proc.stderr


def test_a_raised_max_epochs_continues_a_finished_run(good, tmp_path):
    root, params, _ = good
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", f"{root}/.", str(work)], check=True)
    more = setp("train.max_epochs", 2)(copy.deepcopy(params))
    proc = run("train", work, more, "--resume", "--no-tracking")
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((work / "reports/train/imdb/metrics.json").read_text())["swarmformer_small-seed0"]
    assert metrics["evaluations"] == 2 and metrics["stopped"] == "max_epochs"
    assert not list((work / "outputs/train/imdb").glob(".*"))  # no in-progress folder left


# --------------------------------------------------------------------------------------- kill -9 mid-write


STAGES = [
    ("prepare", "data/prepared", ()),
    ("augment", "data/augmented", ()),
    ("tokenize", "data/tokenized", ()),
    ("train", "outputs/train/imdb", ("--no-tracking", "--restart")),
    ("evaluate", "reports/evaluate/imdb", ("--no-tracking",)),
]


def leftovers(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for top in ("data", "outputs", "reports")
        for p in (root / top).rglob(".*")
        if ".tmp-" in p.name or p.name.endswith((".run", ".old"))
    )


@pytest.mark.parametrize(("stage", "output", "args"), STAGES, ids=[s[0] for s in STAGES])
def test_kill_9_in_mid_write_then_a_rerun_succeeds_with_nothing_left(good, tmp_path, stage, output, args):
    root, params, before = good
    work = tmp_path / "w"
    subprocess.run(["cp", "-a", f"{root}/.", str(work)], check=True)
    env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(work),
        "OMP_NUM_THREADS": "1",
        "SWARMLAB_PROGRESS": "0",
    }
    path = work / "case.yaml"
    path.write_text(yaml.safe_dump(params))
    proc = subprocess.Popen(
        held_before_swap(*stage_module(stage), "--params", str(path), "--profile", "t", *args),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    parent = (work / output).parent if stage != "train" else work / output
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:  # until its temporary output exists
        if [p for p in parent.glob(".*") if ".tmp-" in p.name or p.name.endswith(".run")]:
            time.sleep(0.3 if stage != "train" else 1.0)  # inside the write (train: inside fit)
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL, "the stage ended before it could be killed"
    after = snapshot(work)
    assert {k: v for k, v in after.items() if k in before} == before, "a killed stage changed a finished output"
    assert leftovers(work), "the kill should have left a temporary folder for the rerun to clean"
    rerun = run(stage, work, params, *args)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert leftovers(work) == [], leftovers(work)
