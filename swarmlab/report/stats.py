"""Intervals and paired tests for the ledger. Every result says which test made it.

* one run: a **percentile bootstrap over the test items** (``bootstrap``), resampling items with replacement;
* several seeds of one model: a **t-interval across seeds** (``across_seeds``: the mean of the per-seed test
  metrics, Student's t with n - 1 degrees of freedom; n >= 2);
* two models, one seed each: a **paired bootstrap over the same test items** (``paired_bootstrap``): the items are
  resampled together, so per-item difficulty cancels;
* two models with several matched seeds each: a **paired t-test across seeds** (``paired_seeds``) on the per-seed
  differences.

Resampling is deterministic: the generator is seeded (``SEED``), so the same scores give the same interval. Metrics
that are not a mean over items (precision, recall, F1 of the positive class) are recomputed on each resample from
the items' predictions and labels (``statistic``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats as sps

SEED = 0
RESAMPLES = 2000
LEVEL = 0.95


def _flat(x: np.ndarray) -> bool:
    """No spread, up to rounding (0.8 - 0.6 and 0.81 - 0.61 differ in the last bit): a t-test has nothing to scale."""
    return float(np.ptp(x)) <= 1e-12 * max(1.0, float(np.abs(x).max()))


class _Tested:
    """What lets a result be tested against any boundary, not only 0: the per-seed values of a t-based result
    (``sample``), or the resampled statistics of a bootstrap (``draws``). Neither: an exact count or one
    measurement, which has no p."""

    sample: tuple[float, ...] | None
    draws: np.ndarray | None

    def p_against(self, x: float) -> float | None:
        """The two-sided p of "the true value is ``x``": Student's t on the per-seed values (``scipy.stats.ttest_1samp``),
        or the bootstrap's own p (twice the smaller tail of the resamples beyond ``x``, at least 1 / resamples).
        Consistent with the interval: at ``LEVEL`` = 0.95, p < 0.05 exactly when the interval excludes ``x`` (t) or
        nearly so (bootstrap)."""
        if self.sample is not None:
            x_ = np.asarray(self.sample, dtype=float)
            if _flat(x_):  # no spread: the values are the value
                return 0.0 if abs(float(x_.mean()) - x) > 1e-12 * max(1.0, abs(x)) else 1.0
            return float(sps.ttest_1samp(x_, popmean=x).pvalue)
        if self.draws is not None:
            d = self.draws
            return float(min(1.0, max(2 * min(np.mean(d <= x), np.mean(d >= x)), 1 / len(d))))
        return None


@dataclasses.dataclass(frozen=True)
class Interval(_Tested):
    """A value with its ``level`` interval [lo, hi] and the test that made it."""

    value: float
    lo: float
    hi: float
    n: int  # test items (bootstrap) or seeds (across seeds)
    test: str
    sample: tuple[float, ...] | None = None  # per-seed values (a t-interval)
    draws: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)  # bootstrap resamples

    def excludes(self, x: float) -> bool:
        return x < self.lo or x > self.hi


@dataclasses.dataclass(frozen=True)
class Difference(_Tested):
    """``a - b`` with its interval, a two-sided p-value against 0 and the test; ``significant``: the interval
    excludes 0. ``p_against(x)`` tests another boundary (a margin)."""

    diff: float
    lo: float
    hi: float
    p: float
    n: int
    test: str
    sample: tuple[float, ...] | None = None  # per-seed differences (a paired t-test)
    draws: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)  # bootstrap resamples

    @property
    def significant(self) -> bool:
        return self.lo > 0 or self.hi < 0


def fdr(pvalues: list[float]) -> list[float]:
    """Benjamini–Hochberg q-values (``scipy.stats.false_discovery_control``) of a family of tests, in their order."""
    if not pvalues:
        return []
    return [float(q) for q in sps.false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


def seeds_for_power(
    differences: list[float], *, effect: float | None = None, power: float = 0.8, alpha: float = 0.05, cap: int = 20
) -> int | None:
    """The fewest matched seeds at which a two-sided paired t-test at ``alpha`` detects ``effect`` (default: the
    differences' own mean) with ``power``, given the seed-to-seed spread of ``differences`` (their standard
    deviation); None when even ``cap`` seeds do not (or the differences have no spread to plan with)."""
    d = np.asarray(differences, dtype=float)
    if len(d) < 2 or float(d.std(ddof=1)) == 0:
        return None
    size = abs(float(d.mean()) if effect is None else effect) / float(d.std(ddof=1))
    for n in range(2, cap + 1):
        t = sps.t.ppf(1 - alpha / 2, n - 1)
        nc = size * math.sqrt(n)
        if sps.nct.sf(t, n - 1, nc) + sps.nct.cdf(-t, n - 1, nc) >= power:
            return n
    return None


# ----------------------------------------------------------------------------------------------- statistics


def _f1_parts(pred: np.ndarray, label: np.ndarray, positive: int = 1) -> tuple[float, float, float]:
    tp = float(np.sum((pred == positive) & (label == positive)))
    pp, ap = float(np.sum(pred == positive)), float(np.sum(label == positive))
    precision = tp / pp if pp else 0.0
    recall = tp / ap if ap else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


PAIRED_METRICS = {"precision": 0, "recall": 1, "f1": 2}  # computed from (pred, label), not a mean over items


def statistic(items: dict[str, np.ndarray], metric: str):
    """``(columns, fn)``: the item columns ``metric`` needs and the function of (resampled) columns giving it.

    ``metric`` is a test metric's name without ``test_`` (``accuracy``, ``loss``, ``f1``...). A name with a column of
    its own is the column's mean; precision / recall / F1 come from the predictions and labels. Raises KeyError when
    the items cannot give ``metric``."""
    if metric in items:
        return [metric], lambda cols: float(np.mean(cols[0]))
    if metric in PAIRED_METRICS and "pred" in items and "label" in items:
        k = PAIRED_METRICS[metric]
        return ["pred", "label"], lambda cols: _f1_parts(cols[0], cols[1])[k]
    raise KeyError(metric)


def _mean_fn(columns: list[str]):
    return len(columns) == 1  # a plain mean: resample with one matrix product instead of a Python loop


def _indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))  # (R, n)


def bootstrap(
    items: dict[str, np.ndarray], metric: str, *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> Interval:
    """Percentile bootstrap over the test items of one run."""
    columns, fn = statistic(items, metric)
    cols = [np.asarray(items[c]) for c in columns]
    n = len(cols[0])
    if n == 0:
        raise ValueError(f"no test items for {metric}")
    value = fn(cols)
    idx = _indices(n, resamples, seed)
    if _mean_fn(columns):
        draws = cols[0][idx].mean(axis=1)
    else:
        draws = np.array([fn([c[i] for c in cols]) for i in idx])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Interval(
        value, float(lo), float(hi), n, f"percentile bootstrap over {n} test items ({resamples} resamples)", draws=draws
    )


def across_seeds(values: list[float], *, level: float = LEVEL) -> Interval:
    """t-interval of the mean of per-seed values (n >= 2)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        raise ValueError("an interval across seeds needs at least 2 seeds")
    mean = float(x.mean())
    if _flat(x):
        return Interval(mean, mean, mean, n, f"t-interval across {n} seeds", sample=tuple(map(float, x)))
    lo, hi = sps.ttest_1samp(x, popmean=0).confidence_interval(level)
    return Interval(mean, float(lo), float(hi), n, f"t-interval across {n} seeds", sample=tuple(map(float, x)))


def paired_bootstrap(
    a: dict[str, np.ndarray],
    b: dict[str, np.ndarray],
    metric: str,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Difference:
    """``metric(a) - metric(b)`` on the same test items, resampled together; p = twice the smaller tail of the
    resampled differences beyond 0 (at least 1 / resamples)."""
    columns, fn = statistic(a, metric)
    statistic(b, metric)
    ca, cb = [np.asarray(a[c]) for c in columns], [np.asarray(b[c]) for c in columns]
    n = len(ca[0])
    if len(cb[0]) != n:
        raise ValueError(f"the two runs scored {n} and {len(cb[0])} test items: a paired test needs the same items")
    diff = fn(ca) - fn(cb)
    idx = _indices(n, resamples, seed)
    if _mean_fn(columns):
        draws = (ca[0] - cb[0])[idx].mean(axis=1)
    else:
        draws = np.array([fn([c[i] for c in ca]) - fn([c[i] for c in cb]) for i in idx])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    p = min(1.0, max(2 * min(np.mean(draws <= 0), np.mean(draws >= 0)), 1 / resamples))
    return Difference(
        float(diff),
        float(lo),
        float(hi),
        float(p),
        n,
        f"paired bootstrap over {n} shared test items ({resamples} resamples)",
        draws=draws,
    )


def paired_seeds(a: list[float], b: list[float], *, level: float = LEVEL) -> Difference:
    """Paired t-test on matched seeds' differences ``a_k - b_k`` (n >= 2)."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a_ - b_
    n = len(d)
    if n < 2:
        raise ValueError("a paired test across seeds needs at least 2 matched seeds")
    mean, test, sample = float(d.mean()), f"paired t-test across {n} matched seeds", tuple(map(float, d))
    if _flat(d):
        return Difference(mean, mean, mean, 0.0 if mean else 1.0, n, test, sample=sample)
    res = sps.ttest_rel(a_, b_)
    lo, hi = res.confidence_interval(level)
    return Difference(mean, float(lo), float(hi), float(res.pvalue), n, test, sample=sample)


def unpaired_bootstrap(
    a: dict[str, np.ndarray],
    b: dict[str, np.ndarray],
    metric: str,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Difference:
    """``metric(a) - metric(b)`` with the two runs' items resampled independently: for runs whose items cannot be
    paired (rebuilt from counts). Wider than the paired test: it cannot cancel per-item difficulty."""
    columns, fn = statistic(a, metric)
    statistic(b, metric)
    ca, cb = [np.asarray(a[c]) for c in columns], [np.asarray(b[c]) for c in columns]
    na, nb = len(ca[0]), len(cb[0])
    ia, ib = _indices(na, resamples, seed), _indices(nb, resamples, seed + 1)
    if _mean_fn(columns):
        draws = ca[0][ia].mean(axis=1) - cb[0][ib].mean(axis=1)
    else:
        draws = np.array([fn([c[i] for c in ca]) - fn([c[j] for c in cb]) for i, j in zip(ia, ib)])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    p = min(1.0, max(2 * min(np.mean(draws <= 0), np.mean(draws >= 0)), 1 / resamples))
    return Difference(
        float(fn(ca) - fn(cb)),
        float(lo),
        float(hi),
        float(p),
        min(na, nb),
        f"unpaired bootstrap of {na} and {nb} test items ({resamples} resamples; items not pairable)",
        draws=draws,
    )
