"""docs/extending.md, done as a reader would (#38 item 5, #36 item 3): in a copy of the repository, a new model and a
new task are added by touching exactly the files the guide lists, and `dvc repro` trains and evaluates them at the
smoke profile. A guide whose steps are missing one fails here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.e2e.test_pipeline_e2e import copy_repo, stage_env

pytestmark = pytest.mark.slow

MODEL = '''"""A bag of embeddings: the mean of the real tokens' embeddings, then a linear head (a toy for docs/extending.md)."""

from dataclasses import dataclass

import torch
import torch.nn as nn

from models.layers.params import NumParamsMixin
from models.registry import build_config, register_model
from swarmlab.settings import check_config, setting


@dataclass
class BagConfig:
    vocab_size: int = setting(30522, ge=1)
    num_classes: int = setting(2, ge=1)
    seq_len: int = setting(256, ge=1)  # what the data fixes for a text model: vocab_size, num_classes, seq_len
    d_model: int = setting(16, ge=1)

    def __post_init__(self):
        check_config(self)


class Bag(NumParamsMixin, nn.Module):
    def __init__(self, cfg: BagConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = torch.ones_like(input_ids, dtype=torch.float32) if attention_mask is None else attention_mask.float()
        pooled = (self.emb(input_ids) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.head(pooled)


@register_model(kind="text")
def toy_bag(**overrides) -> Bag:
    return Bag(build_config(BagConfig, {}, overrides))
'''

TASK = '''"""``toy_majority``: is token 1 more frequent than token 2? The counting toy under a new name (docs/extending.md)."""

from tasks.registry import register_task
from tasks.toy import ToyCountingTask


@register_task
class ToyMajorityTask(ToyCountingTask):
    name = "toy_majority"
'''


def test_a_new_model_and_a_new_task_run_through_dvc_repro(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    touched = {}

    def write(rel: str, text: str) -> None:
        touched[rel] = (repo / rel).is_file()
        (repo / rel).write_text(text)

    # a new model: one file (models/<name>.py); the registry finds it
    write("models/toy_bag.py", MODEL)
    # a new task: its file, its params section and search space; dvc.yaml's task lists are generated
    write("tasks/toy_majority.py", TASK)
    raw = yaml.safe_load((repo / "params.yaml").read_text())
    raw["profile"] = "smoke"
    raw["defaults"]["tasks"]["toy_majority"] = {
        "models": ["toy_bag"],
        "tuning": "pinned",
        "model_overrides": {},
        "train": {"max_epochs": 0, "max_steps": 40, "eval_every": 20, "batch_size": 32, "lr": 1.0e-2, "patience": 0},
        "options": {"seq_len": 16, "val_rows": 128, "test_rows": 128},
    }
    raw["defaults"]["sweep"]["spaces"]["toy_majority"] = {"default": {"lr": {"loguniform": [1.0e-3, 1.0e-1]}}}
    write("params.yaml", yaml.safe_dump(raw, sort_keys=False))
    env = stage_env(tmp_path / "mlruns.db")
    deps = subprocess.run(
        [sys.executable, "-m", "swarmlab.drive.dvcdeps"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert deps.returncode == 0, deps.stderr
    for name, stage in (("dvc.yaml", "train"), ("dvc.yaml", "evaluate"), ("sweeps/dvc.yaml", "sweep")):
        assert f"{name}: {stage}@'s task list is not the generated one" in deps.stderr, deps.stderr
    assert "toy_majority: {data: tasks/toy_majority.py, monitor: val_accuracy}" in (repo / "dvc.yaml").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "evaluate@toy_majority"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for stage in ("sweeps/dvc.yaml:sweep@toy_majority", "train@toy_majority", "evaluate@toy_majority"):
        assert f"Running stage '{stage}'" in proc.stdout, proc.stdout[-3000:]
    evaluated = json.loads((repo / "reports" / "evaluate" / "toy_majority" / "metrics.json").read_text())
    (entry,) = evaluated.values()
    assert entry["model"] == "toy_bag" and entry["test_rows"] == 128 and 0 <= entry["test_accuracy"] <= 1
    # exactly the files docs/extending.md lists: two new ones and params.yaml, no dvc.yaml by hand
    assert touched == {"models/toy_bag.py": False, "tasks/toy_majority.py": False, "params.yaml": True}
