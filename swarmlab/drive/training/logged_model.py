"""A training run's best checkpoint as an MLflow model: the run's Models column, the experiment's Models page, and
``mlflow.pyfunc.load_model(<model uri>).predict(batch)`` in anyone's process.

The model is logged *from code* (MLflow's models-from-code): this file is what MLflow stores and runs to load it (its
last lines hand MLflow the model when it is run so, never when it is imported), and the model's artifacts are the run's ``best.pt`` (a state dict, read with
``weights_only=True``, as every checkpoint here), its ``run.json`` (the model's whole config) and its ``run_spec.yaml``
(the task). Nothing is pickled. Loading needs this project installed (``pip install -e .``), not the data: the model is
rebuilt from its recorded config (``models.create_model``) and ``predict`` is the task's own forward pass
(``Task.forward``) on a batch as the task's data gives it (a dict of arrays; only the keys the forward pass reads).
Its signature and input example are two items of the validation split, and its output is the task's forward output
(logits; for image generation ``logits`` and ``nats``).

At logging time the model is loaded back through this same class and its prediction on the example is checked
against the trained model's own: what MLflow stores is what was trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import mlflow.pyfunc
import numpy as np
import torch
import yaml
from mlflow.types.type_hints import TypeFromExample

import models
from swarmlab.engine import load_checkpoint, load_weights
from swarmlab.errors import SwarmlabError
from swarmlab.drive.runs import TaskSpec

CODE = Path(__file__)  # the file MLflow stores with the model and runs to load it
EXAMPLE_ITEMS = 2  # validation items in the signature's input example


class CheckpointModel(mlflow.pyfunc.PythonModel):
    """A run's ``best.pt`` behind MLflow's pyfunc interface: ``predict({"input_ids": ..., ...})`` is the task's
    forward pass, in inference mode on the CPU, as numpy (a dict of arrays where the task's forward gives a dict)."""

    def load_context(self, context) -> None:
        record = json.loads(Path(context.artifacts["run"]).read_text())
        spec = yaml.safe_load(Path(context.artifacts["spec"]).read_text())
        self.task = TaskSpec(**spec["task"]).build()
        self.model = models.create_model(record["model"], **record["model_cfg"])
        weights = Path(context.artifacts["weights"])
        load_weights(self.model, load_checkpoint(weights), weights)
        self.model.eval()

    def predict(self, context, model_input: TypeFromExample, params=None):  # the input example's type: a dict
        batch = {k: torch.as_tensor(np.asarray(v)) for k, v in dict(model_input).items()}
        with torch.inference_mode():
            return as_numpy(self.task.forward(self.model, batch))


def as_numpy(outputs):
    """A forward output (a tensor, a tuple or a dict of them) as numpy: an array, or a dict of arrays."""
    if torch.is_tensor(outputs):
        return outputs.detach().float().cpu().numpy() if outputs.is_floating_point() else outputs.cpu().numpy()
    if isinstance(outputs, dict):
        return {k: as_numpy(v) for k, v in outputs.items()}
    return {f"output_{i}": as_numpy(v) for i, v in enumerate(outputs)}


class _Reads(dict):
    """A batch that remembers which keys the forward pass read: the model's inputs, never the labels it ignores."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: list[str] = []

    def __getitem__(self, key):
        if key not in self.read:
            self.read.append(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default


def example_input(task, model: torch.nn.Module, val_ds) -> dict[str, np.ndarray]:
    """The first ``EXAMPLE_ITEMS`` validation items, as numpy, keeping only what ``task.forward`` reads."""
    n = min(EXAMPLE_ITEMS, len(val_ds))
    batch = _Reads({k: v.cpu() for k, v in val_ds.get_batch(torch.arange(n)).items() if torch.is_tensor(v)})
    with torch.inference_mode():
        task.forward(model, batch)
    return {k: batch[k].numpy() for k in batch.read}


def checked_example(task, reference: torch.nn.Module, val_ds, run_dir: Path, spec_file: Path):
    """The signature's input example (from ``val_ds``), the model's output on it, and the artifacts to log.

    The model is loaded back as MLflow will load it (``CheckpointModel.load_context`` on the run's ``best.pt``,
    ``run.json`` and ``spec_file``) and must predict exactly what ``reference`` (the model as the stage builds it,
    with the best weights, in eval mode) does, each under the same RNG seed; otherwise one line, and nothing logged."""
    artifacts = {"weights": str(run_dir / "best.pt"), "run": str(run_dir / "run.json"), "spec": str(spec_file)}
    loaded = CheckpointModel()
    loaded.load_context(SimpleNamespace(artifacts=artifacts))
    inputs = example_input(task, reference, val_ds)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        output = loaded.predict(None, inputs)
        torch.manual_seed(0)
        with torch.inference_mode():
            direct = as_numpy(task.forward(reference, {k: torch.as_tensor(v) for k, v in inputs.items()}))
    if not _same(output, direct):
        raise SwarmlabError(
            f"the MLflow model of {run_dir.name} (rebuilt from run.json's model_cfg) predicts otherwise than its "
            f"best.pt in the model the stage builds: not logged"
        )
    return inputs, output, artifacts


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


if __name__ != "swarmlab.drive.training.logged_model":  # run by MLflow as the model's code (its copy), not imported
    from mlflow.models import set_model

    set_model(CheckpointModel())
