"""The task contract: everything a stage needs from a task, so that train, evaluate and sweep hold no
assumption about text, sets, long documents or images.

A task says what is learned and how it is scored:

* **options**: ``Task.Options``, a dataclass filled from ``tasks.<name>.options`` in params.yaml and
  checked like the rest of the settings (unknown keys, wrong types and refused values are one-line errors);
* **data**: ``model_kwargs()`` (what ``models.create_model`` needs from the data: vocabulary and classes
  for text, input and output dimensions for sets), ``train_data(model_cfg)`` and ``eval_data(split,
  model_cfg)``. Training data is either *finite* (``FiniteData``: the engine walks epochs over it) or
  *endless* (``EndlessData``: a fresh batch for every step, e.g. newly generated clustering tasks);
* **compute**: ``forward(model, batch)`` returns whatever the model returns (a tensor, a tuple such as a
  mixture's (pi, mu, sigma), or a dict) and ``loss(outputs, batch)`` a scalar tensor;
* **scores**: ``new_metrics()`` returns a ``Metrics`` object that accumulates on the device without a
  host sync and casts for itself; ``monitor``/``mode`` name the validation metric that selects checkpoints;
* **reports**: ``report(meter, out_dir, title=...)`` writes the task's own figures (a confusion matrix,
  per-class scores) and returns their paths;
* **samples** (generative tasks only): ``sample(model, out_dir, ...)`` draws from a trained model and writes
  what it drew (the generic ``sample@<task>`` stage, ``pipelines/sample.py``).

Batches are dicts of tensors. A finite dataset has ``__len__`` and ``get_batch(idx: LongTensor) -> dict``;
it may add ``batch_plan(batch_size, generator)`` (its own grouping, e.g. sets of similar size) and
``to(device)`` (a copy living on the device). The engine does the shuffling, batching, devices and
precision, so a task never loops.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn as nn

from swarmlab.batches import batch_len, is_endless
from swarmlab.errors import SwarmlabError
from swarmlab.integrity import (
    ITEMS_FILE,
    check_disjoint,
    fingerprint,
    item_digest,
    read_items,
    verify_files,
    write_items,
)
from swarmlab.settings import parse

Outputs = torch.Tensor | tuple | dict  # what a model returns: a tensor, a tuple of tensors or a dict of them


# ----------------------------------------------------------------------------------------------- options


@dataclasses.dataclass
class NoOptions:
    """A task without settings of its own."""


def parse_options(cls: type, values: dict | Any | None, where: str):
    """``cls(**values)`` checked by ``swarmlab.settings.parse``: unknown keys, types, non-finite numbers, the
    ranges and choices declared with ``setting(...)``, then the dataclass's own ``__post_init__`` (a
    ``ValueError`` there keeps its message); every refusal is one line naming ``where`` and the key."""
    if isinstance(values, cls):
        return values
    return parse(cls, values, where)


# -------------------------------------------------------------------------------------------------- data


@runtime_checkable
class FiniteData(Protocol):
    """A split held in memory: the engine draws batches of indices from it."""

    def __len__(self) -> int: ...

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]: ...


class EndlessData(abc.ABC):
    """A training source that makes a fresh batch for every step (no epochs): synthetic tasks, say.

    ``batch(step, batch_size, seed)`` should depend only on its arguments, so that a resumed run sees the
    batches an uninterrupted run would. Drawing from numpy's or Python's global generators works too: the
    engine seeds them from ``seed`` and carries their state in every checkpoint.
    """

    endless: ClassVar[bool] = True

    @abc.abstractmethod
    def batch(self, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
        """The training batch of optimizer step ``step`` (0-based)."""


# ----------------------------------------------------------------------------------------------- metrics


class Metrics(abc.ABC):
    """Streaming metrics of one pass (an evaluation, or the training steps between two evaluations).

    ``update`` runs every step: it must not move data to the host or read a value (no ``.item()``,
    ``.cpu()``, ``float(tensor)``); it detaches and casts the outputs itself and accumulates on their
    device. ``compute`` syncs once and returns plain floats.
    """

    @abc.abstractmethod
    def update(self, outputs: Outputs, batch: dict, loss: torch.Tensor | None = None) -> None: ...

    @abc.abstractmethod
    def compute(self) -> dict[str, float]: ...

    def extras(self) -> dict:
        """JSON-able results beside the scalars (a confusion matrix, say); empty by default."""
        return {}

    # Per-item scores, for intervals and paired tests over the test items (swarmlab.drive.report.stats). Off by default:
    # training passes keep nothing per row; the evaluate stage sets ``keep_items = True`` before its pass.
    keep_items: bool = False

    def _keep(self, name: str, values: torch.Tensor) -> None:
        """Append one batch's per-row ``values`` (B,) of score ``name`` (detached, on the device: no host sync)."""
        if self.keep_items:
            store = self.__dict__.setdefault("_items", {})
            store.setdefault(name, []).append(values.detach().double().reshape(-1))

    def item_scores(self) -> dict[str, np.ndarray]:
        """Per test item (row, in the order seen) scores of the last pass, one float64 array per score, named as
        ``compute``'s keys whose mean they are (``accuracy`` 0/1, ``loss``, ``bits_per_dim``, ...). Needs
        ``keep_items = True`` before the pass; a meter that scores no row on its own must say so."""
        if not self.keep_items:
            raise RuntimeError("item_scores() needs keep_items = True before the pass")
        store = self.__dict__.get("_items") or {}
        return {name: torch.cat(parts).cpu().numpy() if parts else np.zeros(0) for name, parts in store.items()}


class LossMeter(Metrics):
    """The mean of the batches' mean losses, weighted by rows; the base of the tasks' meters."""

    def __init__(self):
        self.loss_sum: torch.Tensor | None = None  # on the device of the first loss seen
        self.loss_rows = 0
        self.rows = 0

    def update(self, outputs: Outputs, batch: dict, loss: torch.Tensor | None = None) -> None:
        n = batch_len(batch)
        self.rows += n
        if loss is not None:
            value = loss.detach().double() * n  # float64, as Python floats summed before
            self.loss_sum = value if self.loss_sum is None else self.loss_sum + value
            self.loss_rows += n

    def compute(self) -> dict[str, float]:
        return {"loss": float(self.loss_sum) / self.loss_rows} if self.loss_rows else {}


# -------------------------------------------------------------------------------------------------- task


class Task(abc.ABC):
    """What is learned and how it is scored. Subclasses are registered with ``tasks.register_task``."""

    name: ClassVar[str] = ""
    model_kind: ClassVar[str] = ""  # which registry entries fit: models.list_models(kind=task.model_kind)
    monitor: ClassVar[str] = "loss"  # validation metric for checkpoint selection, early stopping, backtracking
    mode: ClassVar[str] = "min"  # "max" or "min"
    item_name: ClassVar[str] = "samples"  # what one row is, in messages: "reviews", "tasks", "images"
    Options: ClassVar[type] = NoOptions  # the task's settings: params.yaml `tasks.<name>.options`
    # Where the data stage records its files (swarmlab/integrity.py): a split's files in the data folder as a glob
    # ("{split}-*.parquet"), and the splits the folder holds. "" = the task keeps no such record.
    split_files: ClassVar[str] = ""
    data_splits: ClassVar[tuple[str, ...]] = ("train", "val", "test")

    def __init__(
        self,
        options: dict | Any | None = None,
        *,
        root: str | Path | None = None,
        where: str | None = None,
        key: str | None = None,
    ):
        """``options`` are checked against ``Options`` (errors name ``where``, default ``tasks.<key>.options``);
        relative data paths in them resolve against ``root``. ``key``: the params section this instance runs as
        (it names the stage, train@<key>, the folders and the MLflow experiment); the task's own name by default."""
        self.key = key or self.name
        self.options = parse_options(self.Options, options, where or f"tasks.{self.key}.options")
        self.root = Path(root) if root is not None else Path.cwd()

    def path(self, value: str | Path) -> Path:
        """A path option resolved against the task's root (the work folder of the stages)."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.root / p

    # data ------------------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        """The task's data folder: its ``data_dir`` option resolved against the work folder."""
        value = getattr(self.options, "data_dir", None)
        if value is None:
            raise SwarmlabError(f"task {self.name!r} keeps no data folder (its options have no data_dir)")
        return self.path(value)

    @abc.abstractmethod
    def model_kwargs(self) -> dict:
        """Keyword arguments ``models.create_model`` needs from the data (read once, no tensors)."""

    @abc.abstractmethod
    def train_data(self, model_cfg) -> FiniteData | EndlessData:
        """The training source for a model with config ``model_cfg`` (never the test split)."""

    @abc.abstractmethod
    def eval_data(self, split: str, model_cfg) -> FiniteData:
        """The ``val`` or ``test`` split for a model with config ``model_cfg``."""

    # data integrity (swarmlab/integrity.py) ------------------------------------------------------------
    @property
    def rebuild_hint(self) -> str:
        """How to rebuild the task's data folder, for messages."""
        return f"python -m pipelines.data --task {self.key} (dvc repro of its data stage)"

    def check_data(self, splits: tuple[str, ...] = ("train", "val")) -> None:
        """Check the files of ``splits`` against what the data stage recorded in ``meta.json`` (exactly the recorded
        files, each with its size and SHA-256; ``swarmlab.integrity.verify_files``) before they are read; once per
        split and task instance. ``meta`` (the subclass's) has already checked the options. A task that keeps no
        record (``split_files`` empty) has nothing to check. Reading ``train`` also runs ``check_disjoint_splits``."""
        if not self.split_files:
            return
        self._verify_splits(splits)
        if "train" in splits:  # whoever reads the training split (training, a sweep, the guard) checks it first
            self.check_disjoint_splits()

    def _verify_splits(self, splits: tuple[str, ...]) -> None:
        done = self.__dict__.setdefault("_verified_splits", set())
        for split in splits:
            if split in self.data_splits and split not in done:
                verify_files(self.data_dir, self.meta, split, self.split_files.format(split=split), self.rebuild_hint)
                done.add(split)

    def split_items(self, split: str, folder: Path | None = None) -> dict[Path, list] | None:
        """One hashable key per stored row of ``split`` (in the data folder, or ``folder``), per file, naming the item
        the row holds: its content (an image's bytes, an expression's ids), or its id where the data comes from a
        corpus with ids (a review's, so that IMDB's known duplicate texts across its official splits stay apart and an
        augmented copy names its review). None: the task stores no such split (a stream drawn per step) or keeps no
        record. Called on files already checked against their record."""
        return None

    def record_items(self, folder: Path) -> dict | None:
        """Record the digests of the validation and test items in ``folder/items.json`` (the data stage calls it on
        the folder it built); returns what ``meta.json`` keeps of it, or None for a task without stored items. With
        the record, training compares its rows with it and never opens the test split's files."""
        splits = [s for s in ("val", "test") if s in self.data_splits]
        items = {s: self.split_items(s, folder) for s in splits}
        if "train" not in self.data_splits or not items or any(v is None for v in items.values()):
            return None
        return write_items(folder, items)

    def check_disjoint_splits(self) -> None:
        """Refuse a training split sharing an item with the validation or test split (``integrity.check_disjoint``),
        once per task instance; ``check_data`` runs it whenever the training split is read. The other splits' items
        come from the record the data stage wrote (``items.json``: a sweep never needs the test split's files), else,
        for a folder built without one, from their files."""
        if self.__dict__.get("_disjoint_checked") or "train" not in self.data_splits:
            return
        train = self.split_items("train")
        if train is not None:
            others = {}
            recorded = read_items(self.data_dir, self.meta, self.rebuild_hint) if self.split_files else None
            for split in ("val", "test"):
                if split not in self.data_splits:
                    continue
                if recorded is not None:
                    others[split] = (recorded.get(split, set()), f"recorded in {self.data_dir / ITEMS_FILE}")
                    continue
                if self.split_files:
                    self._verify_splits((split,))  # the files read are the recorded ones
                files = self.split_items(split) or {}
                digests = {item_digest(k) for keys in files.values() for k in keys}
                others[split] = (digests, ", ".join(str(p) for p in files) or "no files")
            check_disjoint(train, others, self.item_name, self.rebuild_hint)
        self._disjoint_checked = True

    def data_fingerprint(self) -> str | None:
        """A short hash of the data folder's recorded content (``swarmlab.integrity.fingerprint``): a run records it,
        and evaluate / sample refuse a checkpoint trained on other data. None when the task keeps no record."""
        if not self.split_files:
            return None
        return fingerprint(self.meta)

    def max_seq_len(self) -> int | None:
        """The longest ``seq_len`` the data can feed a model (a sweep refuses longer ones); None = any."""
        return None

    def chance(self, split: str = "val") -> tuple[float, int] | None:
        """``(score, rows)``: the monitored metric of a predictor that ignores its input, on ``split``, and the split's
        size; what a model that did not learn scores (a sweep calls a model whose every trial stayed within two
        standard errors of it "did not learn at this budget"). None where the monitor has no such floor (a loss)."""
        return None

    def data_inputs(self) -> list[str]:
        """What ``build_data`` reads besides code, as dvc.yaml's dependencies name it: a folder of the shared datasets
        as ``${paths.datasets}/<name>`` (its stage is ``data@<key>``), another stage's output by its folder
        (``data/prepared``); [] (the default) for data made from a seed. dvc.yaml's task lists are generated from it
        (swarmlab/drive/dvcdeps.py)."""
        return []

    def data_steps(self) -> dict[str, Path]:
        """A task whose data is built in several steps, each a cached stage of its own (IMDB: prepare, augment,
        tokenize), names them here in order, each with the folder it writes; the last writes ``data_dir``. Each
        step reads what the steps before it wrote. Empty (the default): one step, or none."""
        return {}

    def build_data(self, out_dir: Path, *, datasets: Path, seed: int, step: str | None = None, settings=None) -> dict:
        """Write the task's data into ``out_dir`` (the generic stage ``python -m pipelines.data --task <key>``
        hands over an empty temporary folder and swaps it in on success); returns a summary for the stage's
        metrics. ``datasets`` is the shared datasets folder, ``seed`` the run's seed. A task with ``data_steps``
        is called once per step, with the step's name and its settings: the checked params section of the same
        name (``prepare:``). A task whose data comes from elsewhere does not implement it."""
        raise NotImplementedError(f"task {self.name!r} builds no data of its own")

    def describe_data(self, train, val) -> dict:
        """Facts about the data worth logging with a run (sizes, lengths)."""
        out = {"val_rows": len(val)}
        if not is_endless(train):
            out["train_rows"] = len(train)
        return out

    # compute ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def forward(self, model: nn.Module, batch: dict) -> Outputs: ...

    @abc.abstractmethod
    def loss(self, outputs: Outputs, batch: dict) -> torch.Tensor:
        """A scalar: the batch's mean loss (computed in fp32 by the task when precision matters)."""

    # scores ----------------------------------------------------------------------------------------
    @abc.abstractmethod
    def new_metrics(self) -> Metrics: ...

    def is_better(self, value: float, best: float | None) -> bool:
        if best is None or (isinstance(best, float) and math.isnan(best)):
            return not (isinstance(value, float) and math.isnan(value))
        return value > best if self.mode == "max" else value < best

    def report(self, meter: Metrics, out_dir: Path, *, title: str = "", name: str = "") -> list[Path]:
        """Task-specific figures of an evaluation (e.g. a confusion matrix) under ``out_dir``; their paths."""
        return []

    # samples ---------------------------------------------------------------------------------------
    def check_sample_count(self, num_samples: int) -> None:
        """Refuse (``SwarmlabError``, one line) a ``sample.num_samples`` this task cannot draw as asked; the sample
        stage calls it before any checkpoint is read. Tasks that draw exactly ``num_samples`` accept any."""
        return None  # this contract's default: the task draws exactly ``num_samples``

    def sample(
        self,
        model: nn.Module,
        out_dir: Path,
        *,
        num_samples: int,
        temperature: float,
        seed: int,
        device: torch.device,
        name: str = "",
    ) -> dict:
        """Draw about ``num_samples`` samples from a trained ``model`` (already on ``device``, in eval mode) and
        write them into ``out_dir`` (figures, arrays); returns a JSON-able summary.

        The generic ``sample@<task>`` stage (``pipelines/sample.py``) loads each model's best checkpoint, hands
        over an empty folder per model inside a temporary sibling of ``reports/sample/<task>`` and swaps it in
        on success. ``seed`` seeds the draws (the same seed gives the same samples on the same device),
        ``temperature`` divides the logits, ``name`` names the model in titles. Tasks that generate nothing do
        not implement it."""
        raise NotImplementedError(f"task {self.name!r} draws no samples: it has no sample@ stage")
