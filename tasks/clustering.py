"""Paper 003's amortized-clustering tasks (SWARM mappings, §4.1 and §4.2) on the task contract.

* ``clustering_direct`` (§4.1): every point of a task gets logits over ``slots`` cluster slots; the loss is the
  Hungarian-matched negative log-likelihood (``tasks.set_losses.hungarian_matched_nll``), computed in fp32.
  Data: ``build_data`` (the generic ``derive@clustering_direct`` stage) draws ``train_tasks + val_tasks`` tasks
  from ``data_seed`` and splits them in that order (the paper's 9,000 / 1,000; the authors'
  ``create_data_loders`` takes the first 90% for training), plus ``test_tasks`` more from ``test_seed``: the
  paper has no test split (it reports validation), but the evaluate stage reads ``test`` once, so a fixed test
  split of 1,000 tasks from the same generator is written too. Training batches group sets of similar size
  (the authors' balanced sampler, ``batch_plan``). Metrics: loss, matched accuracy and adjusted Rand index, each
  a mean over tasks.
* ``clustering_mog`` (§4.2): the model gives one vector of K * (2 * dim + 1) numbers per task (a set model with
  ``head: mean`` or ``head: pma``), read as (pi, mu, sigma) by ``mog_params_from_output``; the loss is minus the
  mean per-point log-likelihood. Training data is endless (a fresh batch of tasks per step from (seed, step),
  one N per batch as the authors' ``data_fn``, so nothing is padded); validation and test are fixed sets written
  by ``build_data``. Metrics: loss, ``loglik`` (= -loss, Table 3's number), the ``oracle_loglik`` under the true
  parameters and the gap between them.

Evaluation splits are ordered by set size, starting from the median size: the engine cuts them into consecutive
batches, which then need little padding, and the first task (the one ``report`` draws) is a typical one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from swarmlab import plots
from swarmlab.errors import SwarmlabError
from swarmlab.heartbeat import Heartbeat
from swarmlab.integrity import FILES_KEY, META, check_options, read_meta, record_files
from swarmlab.settings import setting
from tasks.base import EndlessData, LossMeter, Task
from tasks.registry import register_task
from tasks.set_data import (
    DIM,
    MOG_K,
    ClusteringTask,
    MogTask,
    balanced_batches,
    collate,
    make_direct_clustering_tasks,
    make_mog_task,
    make_mog_tasks,
    read_set_tasks,
    write_set_tasks,
)
from tasks.set_losses import (
    accuracy_from_tables,
    ari_from_tables,
    best_matching,
    contingency,
    hungarian_matched_nll,
    mog_log_likelihood,
    mog_oracle_log_likelihood,
    mog_params_from_output,
)


# ------------------------------------------------------------------------------------------------- options


def _check_range(name: str, low: int, high: int, floor: int) -> None:
    if not floor <= low <= high:
        raise ValueError(
            f"{name}_min and {name}_max must satisfy {floor} <= {name}_min <= {name}_max, got {low} and {high}"
        )


# Generator bounds: every option has a range, and a build whose sets would not fit in memory is refused up front
# rather than discovered after minutes of drawing (an n_max of 2,000,000 once rebuilt the data silently).
MAX_TASKS = 1_000_000  # per split (the paper: 9,000 / 1,000 / 10,000)
MAX_POINTS_PER_SET = 20_000  # 20x the paper's largest set (1,000); a set model holds (B, N, D) activations
MAX_CLUSTERS = 100
MAX_POINTS = 100_000_000  # expected points of one build: ~1.6 GB in memory (float32 x, y + int64 label) while written


def _check_budget(where_tasks: str, tasks: int, n_min: int, n_max: int) -> None:
    expected = tasks * (n_min + n_max) / 2
    if expected > MAX_POINTS:
        raise ValueError(
            f"{where_tasks} = {tasks:,} tasks of {n_min}..{n_max} points would be ~{expected:,.0f} points "
            f"(~{expected * 16 / 2**30:.1f} GB while built), above the {MAX_POINTS:,} this build allows: "
            f"lower the task counts or n_max"
        )


@dataclass
class DirectOptions:
    data_dir: str = "data/clustering_direct"  # build_data's output (relative to the work folder)
    train_tasks: int = setting(9000, ge=1, le=MAX_TASKS)  # §4.1.1: 10,000 tasks, 9,000 for training ...
    val_tasks: int = setting(1000, ge=1, le=MAX_TASKS)  # ... and 1,000 for validation
    test_tasks: int = setting(1000, ge=1, le=MAX_TASKS)  # not in the paper (it reports validation): a fixed test split
    n_min: int = setting(
        100, ge=1, le=MAX_POINTS_PER_SET
    )  # points per task ~ U{n_min..n_max}: §4.1.1 "between 100 and 1.000"
    n_max: int = setting(1000, ge=1, le=MAX_POINTS_PER_SET)
    k_min: int = setting(3, ge=1, le=MAX_CLUSTERS)  # clusters per task ~ U{k_min..k_max}: §4.1.1 "between 3 and 10"
    k_max: int = setting(10, ge=1, le=MAX_CLUSTERS)
    slots: int = setting(
        10, ge=1, le=MAX_CLUSTERS
    )  # cluster slots the model scores per point (the authors' n_out = 10); >= k_max
    data_seed: int = setting(
        0, ge=0
    )  # train + val: "sampled once with a fixed random seed" (the authors' create_data_loders(seed=0))
    test_seed: int = setting(1, ge=0)  # the test split's own seed

    def __post_init__(self):
        for name in ("train_tasks", "val_tasks", "test_tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        _check_range("n", self.n_min, self.n_max, 1)
        _check_range("k", self.k_min, self.k_max, 1)
        if self.slots < self.k_max:
            raise ValueError(
                f"slots={self.slots} is below k_max={self.k_max}: the model needs a slot per cluster; "
                f"raise slots or lower k_max"
            )
        if self.data_seed == self.test_seed:
            raise ValueError(
                f"data_seed and test_seed are both {self.data_seed}: the test split would repeat the "
                f"training tasks; give the test split a seed of its own"
            )
        _check_budget(
            "train_tasks + val_tasks + test_tasks",
            self.train_tasks + self.val_tasks + self.test_tasks,
            self.n_min,
            self.n_max,
        )


@dataclass
class MogOptions:
    data_dir: str = "data/clustering_mog"  # build_data's output: the fixed validation and test sets
    n_min: int = setting(100, ge=1, le=MAX_POINTS_PER_SET)  # points per task ~ U{n_min..n_max}: §4.2 "[100, 500]"
    n_max: int = setting(500, ge=1, le=MAX_POINTS_PER_SET)
    val_tasks: int = setting(
        1000, ge=1, le=MAX_TASKS
    )  # fixed validation set (the authors draw 100 fresh batches of 10)
    test_tasks: int = setting(10000, ge=1, le=MAX_TASKS)  # §4.2 "a test log-likelihood of another 10.000 tasks"
    val_seed: int = setting(0, ge=0)  # the training stream is seeded by (the run's seed, step): a different stream
    test_seed: int = setting(1, ge=0)

    def __post_init__(self):
        for name in ("val_tasks", "test_tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        _check_range("n", self.n_min, self.n_max, 1)
        if self.val_seed == self.test_seed:
            raise ValueError(f"val_seed and test_seed are both {self.val_seed}: give the test set a seed of its own")
        _check_budget("val_tasks + test_tasks", self.val_tasks + self.test_tasks, self.n_min, self.n_max)


# ---------------------------------------------------------------------------------------------------- data


def eval_order(sizes: np.ndarray) -> np.ndarray:
    """Indices sorted by size, rotated to start at the median size (see the module docstring)."""
    order = np.argsort(np.asarray(sizes), kind="stable")
    mid = len(order) // 2
    return np.concatenate([order[mid:], order[:mid]])


class DirectSplit:
    """Direct-clustering tasks in memory: ``get_batch`` pads a batch to its largest set and adds the masks.

    Batch: ``x`` (B, N, 2) float, ``labels`` (B, N) long (-1 at padding), ``mask`` (B, N) bool (True = real point),
    and the generating mixture for the report: ``k`` (B,), ``means`` (B, S, 2), ``covs`` (B, S, 2, 2), zero
    beyond each task's k.
    """

    def __init__(self, tasks: list, slots: int):
        self.tasks, self.slots = tasks, slots
        self.sizes = np.array([len(t.points) for t in tasks], np.int64)

    def __len__(self) -> int:
        return len(self.tasks)

    def reordered(self, order: np.ndarray) -> "DirectSplit":
        return DirectSplit([self.tasks[i] for i in order], self.slots)

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        tasks = [self.tasks[i] for i in idx.tolist()]
        x, labels, mask = collate([t.points for t in tasks], [t.labels for t in tasks])
        B, S = len(tasks), self.slots
        means, covs = np.zeros((B, S, DIM), np.float32), np.zeros((B, S, DIM, DIM), np.float32)
        for b, t in enumerate(tasks):
            means[b, : len(t.means)], covs[b, : len(t.covs)] = t.means, t.covs
        return {
            "x": x,
            "labels": labels,
            "mask": mask,
            "k": torch.tensor([len(t.means) for t in tasks]),
            "means": torch.from_numpy(means),
            "covs": torch.from_numpy(covs),
        }

    def batch_plan(self, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
        """The authors' balanced sampler: sort by size, cut into batches, shuffle the batches' order."""
        return [torch.tensor(b, dtype=torch.long) for b in balanced_batches(self.sizes, batch_size, generator)]


def mog_batch(tasks: list[MogTask]) -> dict[str, torch.Tensor]:
    """``x`` (B, N, 2), ``mask`` (B, N) and the true ``pi`` (B, K), ``mu`` (B, K, 2), ``sigma`` (B, K, 2)."""
    x, _, mask = collate([t.points for t in tasks], [np.zeros(len(t.points), np.int64) for t in tasks])
    return {
        "x": x,
        "mask": mask,
        "pi": torch.as_tensor(np.stack([t.pi for t in tasks]), dtype=torch.float32),
        "mu": torch.as_tensor(np.stack([t.mu for t in tasks]), dtype=torch.float32),
        "sigma": torch.as_tensor(np.stack([t.sigma for t in tasks]), dtype=torch.float32),
    }


class MogSplit:
    """A fixed mixture-of-Gaussians set (validation or test) in memory."""

    def __init__(self, tasks: list[MogTask]):
        self.tasks = tasks
        self.sizes = np.array([len(t.points) for t in tasks], np.int64)

    def __len__(self) -> int:
        return len(self.tasks)

    def reordered(self, order: np.ndarray) -> "MogSplit":
        return MogSplit([self.tasks[i] for i in order])

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        return mog_batch([self.tasks[i] for i in idx.tolist()])


class MogStream(EndlessData):
    """Fresh §4.2 tasks for every step: batch ``step`` depends only on (seed, step), so no task is seen twice and a
    resumed run sees the batches an uninterrupted one would. One N ~ U{n_min..n_max} per batch (the authors'
    ``data_fn``), so the batch needs no padding."""

    def __init__(self, n_range: tuple[int, int]):
        self.n_range = n_range

    def batch(self, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
        first, *children = np.random.SeedSequence([seed, step]).spawn(batch_size + 1)
        n = int(np.random.default_rng(first).integers(self.n_range[0], self.n_range[1] + 1))
        return mog_batch([make_mog_task(np.random.default_rng(c), n=n) for c in children])


def _write_meta(out_dir: Path, kind: str, options: dict, splits: dict) -> None:
    files = record_files(
        out_dir,
        {split: [f"{split}.parquet"] for split in ("train", "val", "test") if (out_dir / f"{split}.parquet").is_file()},
    )
    (out_dir / META).write_text(
        json.dumps({"kind": kind, "options": options, "splits": splits, FILES_KEY: files}, indent=2) + "\n"
    )


def check_split_values(path: Path, tasks: list, *, kind: str, slots: int | None, hint: str) -> None:
    """What a model would choke on, named by file and row: tasks of another kind (another task's file), a label
    outside the task's clusters or the model's slots, a NaN or inf coordinate."""
    want = ClusteringTask if kind == "clustering" else MogTask
    if tasks and type(tasks[0]) is not want:
        got = "clustering" if type(tasks[0]) is ClusteringTask else "mog"
        raise SwarmlabError(
            f"{path} holds {got} tasks, not the {kind} tasks of this data folder: it belongs to another "
            f"task's data; rebuild the folder: {hint}"
        )
    for row, t in enumerate(tasks):
        if not np.isfinite(t.points).all():
            raise SwarmlabError(
                f"{path} row {row}: a point has a NaN or inf coordinate: the file is damaged; rebuild the data: {hint}"
            )
        k = len(t.means) if kind == "clustering" else len(t.pi)
        if len(t.labels) and (
            int(t.labels.min()) < 0 or int(t.labels.max()) >= k or (slots and int(t.labels.max()) >= slots)
        ):
            bad = int(t.labels.min()) if int(t.labels.min()) < 0 else int(t.labels.max())
            raise SwarmlabError(
                f"{path} row {row}: label {bad} outside the task's {k} clusters"
                + (f" (the model scores {slots} slots)" if slots else "")
                + f": rebuild the data: {hint}"
            )


# ------------------------------------------------------------------------------------------------- metrics


class DirectClusteringMeter(LossMeter):
    """Loss, matched accuracy and ARI of direct clustering, each a mean over tasks.

    ``update`` stays on the device: it adds each task's (true cluster x predicted slot) contingency table to a
    list; ``compute`` moves them to the host once and runs the Hungarian matchings and the ARI there. It also keeps
    the first task it sees (the report draws it).
    """

    def __init__(self, slots: int):
        super().__init__()
        self.slots = slots
        self.tables: list[torch.Tensor] = []  # (B, S, S) long per batch, on the outputs' device
        self.example: dict | None = None

    def update(self, outputs: torch.Tensor, batch: dict, loss: torch.Tensor | None = None) -> None:
        super().update(outputs, batch, loss)
        logits = outputs.detach()
        pred = logits.argmax(dim=-1)  # (B, N)
        slots = max(self.slots, logits.shape[-1])
        self.tables.append(contingency(batch["labels"], batch["mask"], pred, slots))
        if self.keep_items:  # per task: its Hungarian-matched NLL (the loss); accuracy and ARI come from the tables
            with _fp32(logits):
                self._keep(
                    "loss", hungarian_matched_nll(F.log_softmax(logits.float(), dim=-1), batch["labels"], batch["mask"])
                )
        if self.example is None:
            self.example = {k: batch[k][0].detach().clone() for k in ("x", "labels", "mask", "k", "means", "covs")}
            self.example["probs"] = torch.softmax(logits[0].float(), dim=-1)  # (N, S)

    def per_task(self) -> dict[str, np.ndarray]:
        tables = torch.cat(self.tables).cpu().numpy() if self.tables else np.zeros((0, self.slots, self.slots))
        return {"matched_accuracy": accuracy_from_tables(tables), "ari": ari_from_tables(tables)}

    def item_scores(self) -> dict[str, np.ndarray]:
        return {**super().item_scores(), **self.per_task()}

    def compute(self) -> dict[str, float]:
        out = super().compute()
        for name, values in self.per_task().items():
            if len(values):
                out[name] = float(values.mean())
        return out


class MogMeter(LossMeter):
    """Loss (= minus the mean per-point log-likelihood), ``loglik``, the ``oracle_loglik`` under the true mixture
    and ``loglik_gap`` = oracle - model, means over tasks accumulated on the device. Keeps the first task seen."""

    def __init__(self, num_clusters: int):
        super().__init__()
        self.num_clusters = num_clusters
        self.oracle_sum: torch.Tensor | None = None
        self.example: dict | None = None

    def update(self, outputs: torch.Tensor, batch: dict, loss: torch.Tensor | None = None) -> None:
        super().update(outputs, batch, loss)
        with torch.no_grad():
            oracle = (
                mog_log_likelihood(batch["x"], batch["mask"], batch["pi"], batch["mu"], batch["sigma"]).double().sum()
            )
        self.oracle_sum = oracle if self.oracle_sum is None else self.oracle_sum + oracle
        if self.keep_items:  # per task: minus its mean per-point log-likelihood (the loss), and the log-likelihood
            with torch.no_grad(), _fp32(outputs):
                pi, mu, sigma = mog_params_from_output(outputs.detach().float(), self.num_clusters, DIM)
                loglik = mog_log_likelihood(batch["x"], batch["mask"], pi, mu, sigma)  # (B,)
            self._keep("loss", -loglik)
            self._keep("loglik", loglik)
        if self.example is None:
            pi, mu, sigma = mog_params_from_output(outputs.detach()[:1].float(), self.num_clusters, DIM)
            self.example = {k: batch[k][0].detach().clone() for k in ("x", "mask", "pi", "mu", "sigma")}
            self.example.update(pred_pi=pi[0], pred_mu=mu[0], pred_sigma=sigma[0])

    def compute(self) -> dict[str, float]:
        out = super().compute()
        if "loss" in out:
            out["loglik"] = -out["loss"]
        if self.oracle_sum is not None and self.rows:
            out["oracle_loglik"] = float(self.oracle_sum) / self.rows
            if "loglik" in out:
                out["loglik_gap"] = out["oracle_loglik"] - out["loglik"]
        return out


# --------------------------------------------------------------------------------------------------- tasks


def _fp32(like: torch.Tensor):
    """No autocast inside a loss: log-softmax and log-likelihoods run in fp32 whatever the forward ran in."""
    return torch.autocast(like.device.type, enabled=False)


class _SetTask(Task):
    model_kind = "set"
    monitor = "loss"
    mode = "min"
    item_name = "tasks"

    @functools.cached_property
    def _splits(self) -> dict:
        return {}  # split name -> loaded split, shared by the models one stage trains in turn

    split_files = "{split}.parquet"

    def _generation_options(self) -> dict:
        """The options the data folder depends on (all but data_dir)."""
        return {k: v for k, v in asdict(self.options).items() if k != "data_dir"}

    @functools.cached_property
    def meta(self) -> dict:
        """``meta.json`` of the data folder, checked: JSON, and built with the options in force."""
        path = self.data_dir / META
        meta = read_meta(path, self.rebuild_hint)
        check_options(meta, path, self._generation_options(), f"tasks.{self.key}.options", self.rebuild_hint)
        return meta

    @property
    def rebuild_hint(self) -> str:
        return f"python -m pipelines.data --task {self.key} (dvc repro derive@{self.key})"

    def _load(self, split: str, make):
        if split not in self._splits:
            self.check_data((split,))
            path = self.data_dir / f"{split}.parquet"
            tasks = read_set_tasks(path)
            check_split_values(
                path,
                tasks,
                kind=self.meta.get("kind", ""),
                slots=getattr(self.options, "slots", None),
                hint=self.rebuild_hint,
            )
            self._splits[split] = make(tasks)
        return self._splits[split]

    def forward(self, model: nn.Module, batch: dict) -> torch.Tensor:
        return model(batch["x"], batch["mask"])


@register_task
class ClusteringDirectTask(_SetTask):
    """§4.1 direct amortized clustering: per-point logits over ``slots`` slots, Hungarian-matched NLL."""

    name = "clustering_direct"
    Options = DirectOptions

    def model_kwargs(self) -> dict:
        return {"dim_input": DIM, "dim_output": self.options.slots}

    def build_data(self, out_dir: Path, *, datasets: Path, seed: int) -> dict:
        o = self.options
        n_range, k_range = (o.n_min, o.n_max), (o.k_min, o.k_max)
        beat = Heartbeat(f"data {self.key}", o.train_tasks + o.val_tasks + o.test_tasks, "tasks").beat
        tasks = make_direct_clustering_tasks(o.train_tasks + o.val_tasks, o.data_seed, n_range, k_range, progress=beat)
        splits = {
            "train": tasks[: o.train_tasks],
            "val": tasks[o.train_tasks :],
            "test": make_direct_clustering_tasks(
                o.test_tasks, o.test_seed, n_range, k_range, progress=lambda i: beat(len(tasks) + i)
            ),
        }
        summary = {}
        for split, items in splits.items():
            write_set_tasks(out_dir / f"{split}.parquet", items)
            sizes = np.array([len(t.points) for t in items])
            summary[f"{split}_tasks"] = len(items)
            summary[f"{split}_points_mean"] = round(float(sizes.mean()), 1)
        _write_meta(out_dir, "clustering", self._generation_options(), summary)
        return summary

    def train_data(self, model_cfg) -> DirectSplit:
        return self._load("train", lambda tasks: DirectSplit(tasks, self.options.slots))

    def split_items(self, split: str, folder: Path | None = None) -> dict[Path, list[bytes]]:
        """Each row's task, by content (its points' bytes): train and val come from one seed, test from another."""
        path = Path(folder or self.data_dir) / f"{split}.parquet"
        return {path: [np.ascontiguousarray(t.points).tobytes() for t in read_set_tasks(path)]}

    def eval_data(self, split: str, model_cfg) -> DirectSplit:
        if split not in ("val", "test"):
            raise ValueError(f"eval_data takes 'val' or 'test', got {split!r}")
        return self._load(
            split, lambda tasks: (s := DirectSplit(tasks, self.options.slots)).reordered(eval_order(s.sizes))
        )

    def describe_data(self, train, val) -> dict:
        o = self.options
        return {
            "train_rows": len(train),
            "val_rows": len(val),
            "points": f"{o.n_min}..{o.n_max}",
            "clusters": f"{o.k_min}..{o.k_max}",
            "slots": o.slots,
        }

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        if outputs.dim() != 3:
            raise SwarmlabError(
                f"{self.key} needs one row of slot logits per point, (B, N, {self.options.slots}); the "
                f"model gave {tuple(outputs.shape)}: use head: none"
            )
        with _fp32(outputs):
            log_probs = F.log_softmax(outputs.float(), dim=-1)  # (B, N, S), fp32 even under autocast
            # The one host sync of a step, and an unavoidable one: the Hungarian assignment of slots to true
            # clusters (scipy's linear_sum_assignment) runs on the host, once per batch, on its (B, S, S) costs.
            return hungarian_matched_nll(log_probs, batch["labels"], batch["mask"]).mean()

    def new_metrics(self) -> DirectClusteringMeter:
        return DirectClusteringMeter(self.options.slots)

    def report(self, meter: DirectClusteringMeter, out_dir: Path, *, title: str = "", name: str = "") -> list[Path]:
        if meter.example is None:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"clustering_{name or self.key}.png"
        return [plot_direct_example(meter.example, path, title)]


@register_task
class ClusteringMogTask(_SetTask):
    """§4.2 parametrized amortized clustering: (pi, mu, sigma) of a 4-component mixture per task."""

    name = "clustering_mog"
    Options = MogOptions
    num_clusters = MOG_K
    data_splits = ("val", "test")  # training data is endless, drawn per step

    def model_kwargs(self) -> dict:
        return {"dim_input": DIM, "dim_output": self.num_clusters * (2 * DIM + 1)}

    def build_data(self, out_dir: Path, *, datasets: Path, seed: int) -> dict:
        o = self.options
        summary = {}
        beat = Heartbeat(f"data {self.key}", o.val_tasks + o.test_tasks, "tasks").beat
        for split, n, split_seed, before in (
            ("val", o.val_tasks, o.val_seed, 0),
            ("test", o.test_tasks, o.test_seed, o.val_tasks),
        ):
            tasks = make_mog_tasks(n, split_seed, (o.n_min, o.n_max), progress=lambda i, b=before: beat(b + i))
            write_set_tasks(out_dir / f"{split}.parquet", tasks)
            oracle = torch.cat([mog_oracle_log_likelihood(tasks[i : i + 1000]) for i in range(0, n, 1000)])
            summary[f"{split}_tasks"] = n
            summary[f"{split}_oracle_loglik"] = round(float(oracle.double().mean()), 4)
        _write_meta(out_dir, "mog", self._generation_options(), summary)
        return summary

    def train_data(self, model_cfg) -> MogStream:
        return MogStream((self.options.n_min, self.options.n_max))

    def eval_data(self, split: str, model_cfg) -> MogSplit:
        if split not in ("val", "test"):
            raise ValueError(f"eval_data takes 'val' or 'test', got {split!r}")
        return self._load(split, lambda tasks: (s := MogSplit(tasks)).reordered(eval_order(s.sizes)))

    def describe_data(self, train, val) -> dict:
        o = self.options
        return {"val_rows": len(val), "points": f"{o.n_min}..{o.n_max}", "train": "endless (seed, step)"}

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        if outputs.dim() != 2:
            raise SwarmlabError(
                f"{self.key} needs one vector per set, (B, {self.num_clusters * (2 * DIM + 1)}); the "
                f"model gave {tuple(outputs.shape)}: give it a pooling head, e.g. tasks.{self.key}."
                f"model_overrides: {{<model>: {{head: mean}}}}"
            )
        with _fp32(outputs):
            pi, mu, sigma = mog_params_from_output(outputs.float(), self.num_clusters, DIM)
            return -mog_log_likelihood(batch["x"], batch["mask"], pi, mu, sigma).mean()

    def new_metrics(self) -> MogMeter:
        return MogMeter(self.num_clusters)

    def report(self, meter: MogMeter, out_dir: Path, *, title: str = "", name: str = "") -> list[Path]:
        if meter.example is None:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"mog_{name or self.key}.png"
        return [plot_mog_example(meter.example, path, title)]


# --------------------------------------------------------------------------------------------------- plots


def plot_direct_example(example: dict, path: Path, title: str = "") -> Path:
    """Paper 003 Figure 4 for the meter's kept task (``DirectClusteringMeter.example``): see ``plots.clustering_example``."""
    mask = example["mask"].cpu().numpy()
    k = int(example["k"])
    return plots.clustering_example(
        example["x"].cpu().numpy()[mask],  # (N, 2)
        example["labels"].cpu().numpy()[mask],
        example["probs"].cpu().numpy()[mask],  # (N, S)
        example["means"][:k].cpu().numpy(),
        example["covs"][:k].cpu().numpy(),
        path,
        title,
        match=best_matching,
    )


def plot_mog_example(example: dict, path: Path, title: str = "") -> Path:
    """The meter's kept §4.2 task (``MogMeter.example``) with its log-likelihood under the true and the predicted
    mixture: see ``plots.mog_example``."""
    mask = example["mask"].cpu()
    x = example["x"].cpu()[mask]
    with torch.no_grad():
        lls = [
            float(
                mog_log_likelihood(
                    x[None],
                    None,
                    example[p + "pi"].cpu()[None].float(),
                    example[p + "mu"].cpu()[None].float(),
                    example[p + "sigma"].cpu()[None].float(),
                )[0]
            )
            for p in ("", "pred_")
        ]
    true, predicted = (
        tuple(example[prefix + key].cpu().float().numpy() for key in ("pi", "mu", "sigma")) for prefix in ("", "pred_")
    )
    return plots.mog_example(x.numpy(), true, predicted, lls, path, title)
