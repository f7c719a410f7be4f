"""Oracles of the set metrics (tasks/set_losses.py computes them from count tables, vectorised): the adjusted Rand
index by counting pairs over two label lists, for tests to hold ``ari_from_tables`` to."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def adjusted_rand_index(labels_true: np.ndarray | Sequence[int], labels_pred: np.ndarray | Sequence[int]) -> float:
    """Adjusted Rand index (Hubert & Arabie, 1985) of two partitions of the same points.

    From the contingency table n_ij with row sums a_i, column sums b_j and n points:
    ``ARI = (sum C(n_ij, 2) - E) / (max - E)``, ``E = sum C(a_i, 2) * sum C(b_j, 2) / C(n, 2)``,
    ``max = (sum C(a_i, 2) + sum C(b_j, 2)) / 2``. Invariant to relabelling; 1 for identical partitions, about 0
    for independent ones, can be negative. When ``max == E`` (both partitions one cluster, or both all
    singletons, or n < 2) the partitions agree and the result is 1.0.

    Args:
        labels_true, labels_pred: (n,) cluster ids (any integers).
    Returns:
        the index as a float.
    """
    a = np.asarray(labels_true).ravel()
    b = np.asarray(labels_pred).ravel()
    if a.shape != b.shape:
        raise ValueError(f"the partitions cover different numbers of points: {a.size} and {b.size}")
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.zeros((ia.max(initial=-1) + 1, ib.max(initial=-1) + 1), np.int64)
    np.add.at(table, (ia, ib), 1)

    def pairs(x: np.ndarray) -> float:
        return float((x * (x - 1) // 2).sum())

    index, sum_a, sum_b = pairs(table), pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    total = a.size * (a.size - 1) / 2
    expected = sum_a * sum_b / total if total > 0 else 0.0
    best = (sum_a + sum_b) / 2
    if best == expected:
        return 1.0
    return (index - expected) / (best - expected)
