"""Amortized-clustering data of paper 003 (SWARM mappings, §4.1 and §4.2): generators, parquet I/O, batching.

Pure functions, no pipeline code. The generators use numpy and scipy only; torch appears only in
:func:`collate` (it returns tensors) and when :func:`balanced_batches` is given a ``torch.Generator``.

* Direct clustering (§4.1.1): N ~ U{100..1000} points in R^2 from K ~ U{3..10} Gaussians with uniform weights,
  means ~ N(0, I), covariances ~ inverse-Wishart(df=4, scale=0.05 I). As in the authors' ``create_dataset``
  (zalandoresearch/SWARM ``clustering_dataset.py``) the cluster sizes are one multinomial draw and the points
  are shuffled afterwards, so labels carry no order.
* Mixture of Gaussians (§4.2, from Lee et al. 2019): K = 4 isotropic clusters with sigma = 0.3, means ~ U(-4, 4)^2,
  weights ~ Dirichlet(1, 1, 1, 1), N ~ U{100..500} (the paper's "[100, 500]"; the authors' ``data_fn`` uses
  ``randint(100, 500)``, which excludes 500, and one N for a whole batch).

Determinism: task i of ``make_*_tasks(n, seed)`` is drawn from ``default_rng(SeedSequence(seed).spawn(n)[i])``,
i.e. ``SeedSequence(seed, spawn_key=(i,))``, so it does not depend on ``n`` or on the other tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from scipy.stats import invwishart

from swarmlab.errors import SwarmlabError

# §4.1.1, direct amortized clustering
DIRECT_N = (100, 1000)  # points per task, both ends included ("uniformly between 100 and 1.000")
DIRECT_K = (3, 10)  # clusters per task, both ends included ("uniformly random between 3 and 10")
IW_DF = 4  # inverse-Wishart degrees of freedom
IW_SCALE = 0.05  # inverse-Wishart scale matrix = IW_SCALE * I
# §4.2, parametrized amortized clustering (mixture of Gaussians)
MOG_K = 4  # "a fixed number of 4 isotropic Gaussian clusters"
MOG_SIGMA = 0.3  # "constant standard deviation sigma = 0.3"
MOG_MEAN_RANGE = (-4.0, 4.0)  # "uniformly in the interval (-4, 4) in both dimensions"
MOG_N = (100, 500)  # points per task, both ends included ("uniformly from the interval [100, 500]")
DIM = 2  # both tasks live in R^2


class SetDataError(SwarmlabError):
    """A set-task file is missing, damaged or has the wrong schema (one line naming the file; the stages print it
    as ``error: ...`` without a traceback)."""


@dataclass(frozen=True, eq=False)
class ClusteringTask:
    """One direct-clustering task and the mixture it was drawn from (for plotting and oracles)."""

    points: np.ndarray  # (N, 2) float32
    labels: np.ndarray  # (N,) int64, cluster index in [0, K)
    means: np.ndarray  # (K, 2) float64
    covs: np.ndarray  # (K, 2, 2) float64
    weights: np.ndarray  # (K,) float64, all 1/K


@dataclass(frozen=True, eq=False)
class MogTask:
    """One mixture-of-Gaussians task and its true parameters (``sigma`` is a per-dimension std dev)."""

    points: np.ndarray  # (N, 2) float32
    labels: np.ndarray  # (N,) int64, cluster index in [0, 4)
    pi: np.ndarray  # (4,) float64, mixture weights (sum to 1)
    mu: np.ndarray  # (4, 2) float64
    sigma: np.ndarray  # (4, 2) float64, all MOG_SIGMA


SetTask = Union[ClusteringTask, MogTask]


def task_rng(seed: int, i: int) -> np.random.Generator:
    """The generator of task ``i`` of a collection drawn with ``seed`` (a SeedSequence child, independent of n)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))


def make_direct_clustering_task(
    rng: np.random.Generator, n_range: tuple[int, int] = DIRECT_N, k_range: tuple[int, int] = DIRECT_K
) -> ClusteringTask:
    """Draw one §4.1.1 task: N ~ U{100..1000} points from K ~ U{3..10} Gaussians (see the module docstring).

    ``n_range`` and ``k_range`` (both ends included) replace the paper's sizes, e.g. for a smaller CPU run.
    """
    n = int(rng.integers(n_range[0], n_range[1] + 1))
    k = int(rng.integers(k_range[0], k_range[1] + 1))
    weights = np.full(k, 1.0 / k)
    counts = rng.multinomial(n, weights)  # (K,)
    means = rng.standard_normal((k, DIM))  # (K, 2)
    covs = np.asarray(invwishart.rvs(df=IW_DF, scale=IW_SCALE * np.eye(DIM), size=k, random_state=rng)).reshape(
        k, DIM, DIM
    )
    labels = np.repeat(np.arange(k), counts)  # (N,), sorted by cluster until the shuffle below
    chol = np.linalg.cholesky(covs)  # (K, 2, 2): covs[j] = chol[j] @ chol[j].T
    z = rng.standard_normal((n, DIM))  # (N, 2)
    points = means[labels] + np.einsum("nij,nj->ni", chol[labels], z)  # (N, 2)
    order = rng.permutation(n)
    return ClusteringTask(points[order].astype(np.float32), labels[order].astype(np.int64), means, covs, weights)


def make_direct_clustering_tasks(
    n_tasks: int, seed: int, n_range: tuple[int, int] = DIRECT_N, k_range: tuple[int, int] = DIRECT_K, progress=None
) -> list[ClusteringTask]:
    """``n_tasks`` §4.1.1 tasks; task i depends only on (seed, i). The paper draws 10,000 (9,000 train).
    ``progress(done)``, when given, is called after every task (a ``swarmlab.heartbeat.Heartbeat.beat``)."""
    out = []
    for i in range(n_tasks):
        out.append(make_direct_clustering_task(task_rng(seed, i), n_range, k_range))
        if progress:
            progress(i + 1)
    return out


def make_mog_task(rng: np.random.Generator, n_range: tuple[int, int] = MOG_N, n: int | None = None) -> MogTask:
    """Draw one §4.2 task: N ~ U{100..500} points from 4 isotropic Gaussians (sigma 0.3), Dirichlet(1) weights.

    ``n_range`` (both ends included) replaces the paper's sizes; ``n`` fixes N instead of drawing it (the authors'
    ``data_fn`` draws one N per batch, so a batch needs no padding).
    """
    if n is None:
        n = int(rng.integers(n_range[0], n_range[1] + 1))
    pi = rng.dirichlet(np.ones(MOG_K))  # (4,)
    mu = rng.uniform(*MOG_MEAN_RANGE, size=(MOG_K, DIM))  # (4, 2)
    labels = rng.choice(MOG_K, size=n, p=pi).astype(np.int64)  # (N,)
    points = mu[labels] + MOG_SIGMA * rng.standard_normal((n, DIM))  # (N, 2)
    return MogTask(points.astype(np.float32), labels, pi, mu, np.full((MOG_K, DIM), MOG_SIGMA))


def make_mog_tasks(n: int, seed: int, n_range: tuple[int, int] = MOG_N, progress=None) -> list[MogTask]:
    """``n`` §4.2 tasks; task i depends only on (seed, i); ``progress(done)`` as in make_direct_clustering_tasks."""
    out = []
    for i in range(n):
        out.append(make_mog_task(task_rng(seed, i), n_range))
        if progress:
            progress(i + 1)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Parquet: one row per task; every array is a flat list column, its shape given by the row's n (points) and k
# (clusters). The schema metadata names the task kind.
_KIND_KEY = b"swarmlab.set_task_kind"
# kind -> (task class, {field: (arrow value type, numpy dtype, shape in terms of n, k)})
_SCHEMAS: dict[str, tuple[type, dict[str, tuple[pa.DataType, type, tuple]]]] = {
    "clustering": (
        ClusteringTask,
        {
            "points": (pa.float32(), np.float32, ("n", DIM)),
            "labels": (pa.int32(), np.int64, ("n",)),
            "means": (pa.float64(), np.float64, ("k", DIM)),
            "covs": (pa.float64(), np.float64, ("k", DIM, DIM)),
            "weights": (pa.float64(), np.float64, ("k",)),
        },
    ),
    "mog": (
        MogTask,
        {
            "points": (pa.float32(), np.float32, ("n", DIM)),
            "labels": (pa.int32(), np.int64, ("n",)),
            "pi": (pa.float64(), np.float64, ("k",)),
            "mu": (pa.float64(), np.float64, ("k", DIM)),
            "sigma": (pa.float64(), np.float64, ("k", DIM)),
        },
    ),
}


def _kind_of(tasks: Sequence[SetTask]) -> str:
    for kind, (cls, _) in _SCHEMAS.items():
        if tasks and all(type(t) is cls for t in tasks):
            return kind
    raise TypeError("write_set_tasks needs a non-empty list of only ClusteringTask or only MogTask")


def write_set_tasks(path: str | Path, tasks: Sequence[SetTask]) -> Path:
    """Write ``tasks`` (all ClusteringTask or all MogTask) to one parquet file, one row per task.

    Args:
        path: the .parquet file to write (parent folders are created).
        tasks: the collection, e.g. from :func:`make_direct_clustering_tasks`.
    Returns:
        the path written.
    """
    kind = _kind_of(tasks)
    _, fields = _SCHEMAS[kind]
    columns = {
        "n": pa.array([len(t.points) for t in tasks], pa.int32()),
        "k": pa.array([len(t.weights if kind == "clustering" else t.pi) for t in tasks], pa.int32()),
    }
    for name, (value_type, _, _) in fields.items():
        columns[name] = pa.array([np.asarray(getattr(t, name)).ravel() for t in tasks], pa.list_(value_type))
    table = pa.table(columns).replace_schema_metadata({_KIND_KEY: kind.encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def read_set_tasks(path: str | Path) -> list[SetTask]:
    """Read a collection written by :func:`write_set_tasks`.

    Raises:
        SetDataError: one line naming ``path`` when the file is missing, unreadable, or its schema or array
            lengths do not match a task collection.
    """
    path = Path(path)
    if not path.is_file():
        raise SetDataError(f"{path} is missing: write it with tasks.set_data.write_set_tasks (or rerun its stage)")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # ArrowInvalid, OSError, ... for damaged files
        raise SetDataError(
            f"cannot read {path}: {str(exc).splitlines()[0]}; the file is damaged: delete it and write it again"
        ) from None
    kind = (table.schema.metadata or {}).get(_KIND_KEY, b"").decode()
    if kind not in _SCHEMAS:
        raise SetDataError(
            f"{path} is not a set-task collection (schema metadata {_KIND_KEY.decode()!r} is "
            f"{kind or 'absent'}; expected one of {sorted(_SCHEMAS)})"
        )
    cls, fields = _SCHEMAS[kind]
    expected = {"n": pa.int32(), "k": pa.int32(), **{name: pa.list_(t) for name, (t, _, _) in fields.items()}}
    for name, typ in expected.items():
        if name not in table.column_names:
            raise SetDataError(f"{path} has no column {name!r} for {kind} tasks; columns: {table.column_names}")
        got = table.schema.field(name).type
        same = got.value_type == typ.value_type if pa.types.is_list(typ) and pa.types.is_list(got) else got == typ
        if not same:  # list item names ("item", "element") differ between writers and do not matter
            raise SetDataError(f"{path}: column {name!r} is {got}, expected {typ}")
        if table.column(name).null_count:
            raise SetDataError(f"{path}: column {name!r} has null rows")
    sizes = {"n": table.column("n").to_numpy().astype(np.int64), "k": table.column("k").to_numpy().astype(np.int64)}
    arrays: dict[str, list[np.ndarray]] = {}
    for name, (_, dtype, shape) in fields.items():
        col = table.column(name).combine_chunks()  # ListArray
        offsets = col.offsets.to_numpy()  # (rows + 1,)
        values = col.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
        per_row = int(np.prod([s for s in shape if isinstance(s, int)]))
        want = sizes[shape[0]] * per_row  # (rows,)
        bad = np.flatnonzero(np.diff(offsets) != want)
        if bad.size:
            i = int(bad[0])
            raise SetDataError(
                f"{path}: row {i} column {name!r} holds {int(np.diff(offsets)[i])} values, expected "
                f"{int(want[i])} ({shape[0]}={int(sizes[shape[0]][i])} x {per_row}); the file is damaged"
            )
        arrays[name] = [
            v.reshape((int(sizes[shape[0]][i]),) + tuple(shape[1:])).astype(dtype, copy=False)
            for i, v in enumerate(np.split(values, offsets[1:-1]))
        ]
    return [cls(**{name: arrays[name][i] for name in fields}) for i in range(table.num_rows)]


# ---------------------------------------------------------------------------------------------------------------
# Batching


def balanced_batches(
    sizes: Sequence[int],
    batch_size: int,
    generator: np.random.Generator | torch.Generator | None = None,
    drop_last: bool = False,
) -> list[list[int]]:
    """Batches of task indices whose sets have similar sizes, so that little padding is needed.

    As the authors' ``BalancedSampler``: sort the tasks by size (stable), cut the sorted list into chunks of
    ``batch_size``, then shuffle the order of the chunks (not their contents). Call once per epoch with the
    same generator for a new chunk order.

    Args:
        sizes: set size N of every task.
        batch_size: tasks per batch (the last one may be smaller unless ``drop_last``).
        generator: numpy or torch generator for the chunk order; None keeps ascending size order.
        drop_last: drop a last, incomplete batch.
    Returns:
        list of batches, each a list of indices into ``sizes``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.argsort(np.asarray(sizes), kind="stable")
    batches = [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    if generator is None:
        return batches
    if isinstance(generator, torch.Generator):
        chunk_order = torch.randperm(len(batches), generator=generator).tolist()
    else:
        chunk_order = generator.permutation(len(batches)).tolist()
    return [batches[j] for j in chunk_order]


def collate(
    points_list: Sequence[np.ndarray], labels_list: Sequence[np.ndarray]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad a batch of sets to the largest one.

    Args:
        points_list: B arrays (N_b, D).
        labels_list: B arrays (N_b,) of cluster indices.
    Returns:
        x (B, Nmax, D) float32 (0 at padding), labels (B, Nmax) long (-1 at padding), mask (B, Nmax) bool
        (True = real entity).
    """
    if len(points_list) != len(labels_list) or not points_list:
        raise ValueError(
            f"collate needs as many label arrays as point arrays (>= 1), got {len(points_list)} and {len(labels_list)}"
        )
    B, n_max, D = len(points_list), max(len(p) for p in points_list), np.asarray(points_list[0]).shape[1]
    x = np.zeros((B, n_max, D), np.float32)
    labels = np.full((B, n_max), -1, np.int64)
    mask = np.zeros((B, n_max), bool)
    for b, (p, y) in enumerate(zip(points_list, labels_list)):
        if len(p) != len(y):
            raise ValueError(f"set {b} has {len(p)} points but {len(y)} labels")
        x[b, : len(p)], labels[b, : len(p)], mask[b, : len(p)] = p, y, True
    return torch.from_numpy(x), torch.from_numpy(labels), torch.from_numpy(mask)


__all__ = [
    "ClusteringTask",
    "MogTask",
    "SetDataError",
    "SetTask",
    "balanced_batches",
    "collate",
    "make_direct_clustering_task",
    "make_direct_clustering_tasks",
    "make_mog_task",
    "make_mog_tasks",
    "read_set_tasks",
    "task_rng",
    "write_set_tasks",
]
