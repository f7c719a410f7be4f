"""Losses and metrics of paper 003's amortized-clustering tasks (torch + scipy; no pipeline code).

* Direct clustering (§4.1): the model gives every point log-probabilities over S cluster *slots*; the slots
  are matched to the true clusters by the Hungarian algorithm (Kuhn 1955) so that the matched log-probability
  is largest, and the loss is minus its mean over the task's points (the authors' ``hungarian_cross_entropy``
  in zalandoresearch/SWARM ``clustering_dataset.py``). Metrics: matched accuracy and the adjusted Rand index.
* Mixture of Gaussians (§4.2): the model gives one vector of K * (2 * dim + 1) numbers per task, read as in
  the authors' ``amortised_MOG.py``; the score is the mean per-point log-likelihood of the task's points.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment


def _contingency(
    labels: torch.Tensor, mask: torch.Tensor, values: torch.Tensor, num_labels: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per task, sum ``values`` of the real points by true cluster: (B, num_labels, S), one scatter for the batch.

    Rows are flattened to ``b * num_labels + label``; an out-of-range label (or a padded point) goes to one
    extra overflow row, so the caller can detect bad labels with the same single transfer.
    Returns (sums (B * num_labels + 1, S), row index (B, N)).
    """
    B, N = labels.shape
    in_range = mask & (labels >= 0) & (labels < num_labels)  # (B, N)
    row = torch.arange(B, device=labels.device)[:, None] * num_labels + labels  # (B, N)
    row = torch.where(in_range, row, torch.full_like(row, B * num_labels))  # padded/invalid -> overflow row
    sums = values.new_zeros(B * num_labels + 1, values.shape[-1])
    sums = sums.index_add(0, row.reshape(-1), values.reshape(B * N, -1))  # (B*K + 1, S)
    return sums, row


def hungarian_matched_nll(log_probs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Minus the mean log-probability of each point's true cluster under the best slot assignment, per task.

    For task b, ``M[k, s] = sum_{i real, label_i = k} log_probs[b, i, s]``; the one-to-one assignment of the
    present true clusters to slots that maximises ``sum_k M[k, sigma(k)]`` is found with
    ``scipy.optimize.linear_sum_assignment`` and the loss is ``-sum_k M[k, sigma(k)] / N_b``. The assignment
    is a constant: the gradient flows through ``log_probs`` only. Computed in fp32 (bf16/fp16 inputs are cast).
    One scatter builds all cost matrices, one ``.cpu()`` moves them; only the K x S assignments run in scipy.

    Args:
        log_probs: (B, N, S) log-probabilities over S slots (e.g. ``log_softmax`` of the model output).
        labels: (B, N) true cluster in [0, S) at real points (anything, e.g. -1, at padding).
        mask: (B, N) bool, True = real point.
    Returns:
        (B,) fp32 loss per task; 0 for a task without real points.
    Raises:
        ValueError: a real point's label is outside [0, S) (more true clusters than slots).
    """
    B, N, S = log_probs.shape
    mask = mask.bool()
    lp = log_probs.float().masked_fill(~mask[..., None], 0.0)  # (B, N, S); padding may hold -inf/NaN
    cost, row = _contingency(labels.long(), mask, lp, S)  # (B*S + 1, S): row b*S + k = M_b[k, :]
    counts = torch.bincount(row.reshape(-1), minlength=B * S + 1)  # (B*S + 1,): points per (task, cluster)
    bad = counts[-1] - (~mask).sum()  # real points with a label outside [0, S) (the rest of the overflow row)
    host = torch.cat([cost.detach()[:-1].reshape(-1), counts[:-1].float(), bad.float().reshape(1)]).cpu().numpy()
    host_cost = host[: B * S * S].reshape(B, S, S)  # (B, K=S, S) cost matrices
    host_counts = host[B * S * S : -1].reshape(B, S)  # (B, S) points per true cluster
    if host[-1] > 0:
        raise ValueError(
            f"{int(host[-1])} real points have a label outside [0, {S}): the model has S={S} slots; "
            "give it dim_output >= the number of true clusters, or fix the labels"
        )
    rows, cols, tasks = [], [], []
    for b in range(B):
        present = np.flatnonzero(host_counts[b] > 0)  # true clusters with points
        if present.size == 0:
            continue
        m = host_cost[b, present]  # (K, S)
        r, c = linear_sum_assignment(m, maximize=True)
        rows.append(b * S + present[r])
        cols.append(c)
        tasks.append(np.full(len(r), b))
    loss = lp.new_zeros(B)
    if rows:
        rows_t = torch.as_tensor(np.concatenate(rows), device=lp.device)
        cols_t = torch.as_tensor(np.concatenate(cols), device=lp.device)
        tasks_t = torch.as_tensor(np.concatenate(tasks), device=lp.device)
        matched = cost[rows_t, cols_t]  # (sum_b K_b,) with gradient
        loss = loss.index_add(0, tasks_t, matched)  # (B,)
    n_real = mask.sum(dim=1).clamp(min=1).float()  # (B,)
    return -loss / n_real


# ------------------------------------------------------------------------------------------------- metrics
# One implementation each: the counts of (true cluster, predicted slot) per task, the Hungarian matching on them, and
# the matched accuracy and ARI from the counts. DirectClusteringMeter (tasks/clustering.py) and the figures use these.


def best_matching(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one-to-one (cluster, slot) pairs that keep the most points: Hungarian on one (K, S) count table."""
    return linear_sum_assignment(table, maximize=True)


def contingency(labels: torch.Tensor, mask: torch.Tensor, pred: torch.Tensor, slots: int) -> torch.Tensor:
    """(B, S, S) long counts of the real points by (true cluster, predicted slot), one ``index_add_``, no host sync."""
    B, N = labels.shape
    flat = (
        torch.arange(B, device=labels.device)[:, None] * slots + labels.clamp(0, slots - 1)
    ) * slots + pred  # (B, N)
    flat = torch.where(mask, flat, torch.full_like(flat, B * slots * slots))  # padding -> one extra bin
    counts = torch.zeros(B * slots * slots + 1, dtype=torch.long, device=labels.device)
    counts.index_add_(0, flat.reshape(-1), torch.ones_like(flat.reshape(-1)))
    return counts[:-1].view(B, slots, slots)


def ari_from_tables(tables: np.ndarray) -> np.ndarray:
    """Adjusted Rand index of every (true x predicted) contingency table in ``tables`` (T, K, S), vectorised.

    From the contingency table n_ij with row sums a_i, column sums b_j and n points (Hubert & Arabie, 1985):
    ``ARI = (sum C(n_ij, 2) - E) / (max - E)``, ``E = sum C(a_i, 2) * sum C(b_j, 2) / C(n, 2)``,
    ``max = (sum C(a_i, 2) + sum C(b_j, 2)) / 2``; 1.0 when ``max == E`` (the partitions agree: both one cluster, both
    all singletons, or fewer than 2 points). The pair-counting oracle is swarmlab/testing/reference_metrics.py.
    """
    t = tables.astype(np.float64)

    def pairs(x: np.ndarray, axes) -> np.ndarray:
        return (x * (x - 1) / 2).sum(axis=axes)

    index, sum_a, sum_b = pairs(t, (1, 2)), pairs(t.sum(axis=2), 1), pairs(t.sum(axis=1), 1)
    n = t.sum(axis=(1, 2))
    total = n * (n - 1) / 2
    expected = np.where(total > 0, sum_a * sum_b / np.maximum(total, 1), 0.0)
    best = (sum_a + sum_b) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(best == expected, 1.0, (index - expected) / (best - expected))


def accuracy_from_tables(tables: np.ndarray) -> np.ndarray:
    """Per table, the share of points on the diagonal of the best one-to-one cluster <-> slot matching; 1 for an
    empty table."""
    out = np.ones(len(tables))
    for i, table in enumerate(tables):
        n = table.sum()
        if n:
            r, c = best_matching(table)
            out[i] = table[r, c].sum() / n
    return out


def matched_accuracy(pred: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Fraction of real points in the right cluster under the best one-to-one slot <-> cluster matching
    (``accuracy_from_tables`` of their counts).

    The matching maximises the number of agreeing points (not the log-probability of the loss), so this is the
    best accuracy any relabelling of the prediction reaches.

    Args:
        pred: (B, N) predicted slot per point, e.g. ``log_probs.argmax(-1)``.
        labels: (B, N) true cluster at real points.
        mask: (B, N) bool, True = real point.
    Returns:
        (B,) float32 in [0, 1]; 1 for a task without real points.
    """
    mask = mask.bool()
    slots = int(max(int(pred.max()) + 1 if pred.numel() else 1, int(labels[mask].max()) + 1 if mask.any() else 1))
    tables = contingency(labels.long(), mask, pred.long().clamp(min=0), slots)
    return torch.as_tensor(accuracy_from_tables(tables.cpu().numpy()), dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------------------
# Mixture of Gaussians (§4.2)

LOG_2PI_HALF = 0.5 * math.log(2 * math.pi)


def mog_params_from_output(
    out: torch.Tensor, num_clusters: int, dim: int = 2
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Read a model's (B, K * (2 * dim + 1)) output as mixture parameters, as the authors' ``amortised_MOG.py``.

    Layout per cluster (``out.view(B, K, 2 * dim + 1)``): ``[mu (dim), sigma_raw (dim), pi_logit (1)]``.
    ``pi = softmax(pi_logit)`` over the clusters (the authors' ``log_softmax``, exponentiated);
    ``sigma = softplus(sigma_raw)`` (the authors' choice, not ``exp``): a per-dimension standard deviation;
    ``mu`` is used as is.

    Args:
        out: (B, K * (2 * dim + 1)).
        num_clusters: K (4 in §4.2).
        dim: dimension of the points (2).
    Returns:
        pi (B, K), mu (B, K, dim), sigma (B, K, dim).
    """
    B, width = out.shape
    if width != num_clusters * (2 * dim + 1):
        raise ValueError(
            f"output width {width} != K * (2 * dim + 1) = {num_clusters * (2 * dim + 1)}: build the "
            f"model with dim_output={num_clusters * (2 * dim + 1)} for K={num_clusters}, dim={dim}"
        )
    per = out.view(B, num_clusters, 2 * dim + 1)  # (B, K, 2*dim + 1)
    mu = per[..., :dim]  # (B, K, dim)
    sigma = F.softplus(per[..., dim : 2 * dim])  # (B, K, dim)
    pi = torch.softmax(per[..., 2 * dim], dim=-1)  # (B, K)
    return pi, mu, sigma


def mog_log_likelihood(
    points: torch.Tensor, mask: torch.Tensor | None, pi: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor | float
) -> torch.Tensor:
    """Mean per-point log-likelihood of each task's real points under a diagonal-covariance Gaussian mixture.

    ``log p(x) = logsumexp_k [log pi_k + sum_d (-(x_d - mu_kd)^2 / (2 sigma_kd^2) - log sigma_kd - log(2 pi)/2)]``,
    computed in fp32.

    Args:
        points: (B, N, D).
        mask: (B, N) bool, True = real point; None = all.
        pi: (B, K) mixture weights (probabilities).
        mu: (B, K, D) means.
        sigma: standard deviations: (B, K, D) diagonal, (B, K) isotropic, or a float.
    Returns:
        (B,) mean log-likelihood over the real points (0 for a task without any).
    """
    x = points.float()[:, :, None, :]  # (B, N, 1, D)
    mu = mu.float()[:, None]  # (B, 1, K, D)
    sigma = torch.as_tensor(sigma, dtype=torch.float32, device=points.device)
    if sigma.dim() == 2:
        sigma = sigma[..., None]  # (B, K, 1): isotropic
    sigma = sigma[:, None] if sigma.dim() == 3 else sigma  # (B, 1, K, D | 1) or a scalar
    z = (x - mu) / sigma  # (B, N, K, D)
    log_norm = (-0.5 * z.square() - torch.log(sigma) - LOG_2PI_HALF).sum(-1)  # (B, N, K): sigma broadcast over D
    per_point = torch.logsumexp(torch.log(pi.float())[:, None, :] + log_norm, dim=-1)  # (B, N)
    if mask is None:
        return per_point.mean(dim=1)
    mask = mask.bool()
    return per_point.masked_fill(~mask, 0.0).sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (B,)


def mog_oracle_log_likelihood(tasks: Sequence) -> torch.Tensor:
    """Mean per-point log-likelihood of each §4.2 task under its *true* parameters: the ceiling for a model.

    Args:
        tasks: ``tasks.set_data.MogTask`` objects (``points``, ``pi``, ``mu``, ``sigma``).
    Returns:
        (n,) float32.
    """
    from tasks.set_data import collate  # only the padding helper; keeps this module importable alone

    x, _, mask = collate([t.points for t in tasks], [np.zeros(len(t.points), np.int64) for t in tasks])
    pi = torch.as_tensor(np.stack([t.pi for t in tasks]), dtype=torch.float32)  # (n, K)
    mu = torch.as_tensor(np.stack([t.mu for t in tasks]), dtype=torch.float32)  # (n, K, D)
    sigma = torch.as_tensor(np.stack([t.sigma for t in tasks]), dtype=torch.float32)  # (n, K, D)
    return mog_log_likelihood(x, mask, pi, mu, sigma)


__all__ = [
    "accuracy_from_tables",
    "ari_from_tables",
    "best_matching",
    "contingency",
    "hungarian_matched_nll",
    "matched_accuracy",
    "mog_log_likelihood",
    "mog_oracle_log_likelihood",
    "mog_params_from_output",
]
