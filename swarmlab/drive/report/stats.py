"""Intervals and paired tests for the ledger. Every result says which test made it.

* one run: a **percentile bootstrap over the test items** (``bootstrap``), resampling items with replacement;
  every bootstrap here is ``scipy.stats.bootstrap`` (percentile method, vectorized, seeded);
* several seeds of one model: a **t-interval across seeds** (``across_seeds``: the mean of the per-seed test
  metrics, Student's t with n - 1 degrees of freedom; n >= 2);
* two models, one seed each: a **paired bootstrap over the same test items** (``paired_bootstrap``): the items are
  resampled together, so per-item difficulty cancels;
* two models with several matched seeds each: a **paired t-test across seeds** (``paired_seeds``) on the per-seed
  differences.

Resampling is deterministic: the generator is seeded (``SEED``), so the same scores give the same interval. Metrics
that are not a mean over items (precision, recall, F1 of the positive class) are recomputed on each resample from
the items' predictions and labels, coded into one column per item (``statistic``).
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
            return _tail_p(self.draws, x)
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


PAIRED_METRICS = {"precision": 0, "recall": 1, "f1": 2}  # computed from (pred, label), not a mean over items


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)


def _f1_along(code: np.ndarray, k: int, axis: int = -1) -> np.ndarray:
    """Precision (0), recall (1) or F1 (2) of the positive class along ``axis``, from items coded ``2 * hit_pred +
    hit_label`` (``hit_*``: 1 where the prediction / the label is the positive class): vectorized over resamples."""
    tp = np.sum(code == 3, axis=axis).astype(float)
    pp = np.sum(code >= 2, axis=axis).astype(float)  # predicted positive
    ap = np.sum(code % 2 == 1, axis=axis).astype(float)  # actually positive
    precision, recall = _ratio(tp, pp), _ratio(tp, ap)
    return (precision, recall, _ratio(2 * precision * recall, precision + recall))[k]


def statistic(items: dict[str, np.ndarray], metric: str, positive: int = 1):
    """``(column, fn)``: one array per test item that ``metric`` is a function of, and ``fn(column, axis)`` giving it
    (vectorized: scipy's bootstrap calls it on a batch of resamples at once).

    ``metric`` is a test metric's name without ``test_`` (``accuracy``, ``loss``, ``f1``...). A name with a column of
    its own is the column's mean; precision / recall / F1 of the positive class come from the predictions and labels,
    coded into one column per item so that a resample keeps each item's prediction with its label. Raises KeyError
    when the items cannot give ``metric``."""
    if metric in items:
        return np.asarray(items[metric], dtype=float), lambda x, axis=-1: np.mean(x, axis=axis)
    if metric in PAIRED_METRICS and "pred" in items and "label" in items:
        k = PAIRED_METRICS[metric]
        pred, label = np.asarray(items["pred"]), np.asarray(items["label"])
        code = 2 * (pred == positive).astype(np.int8) + (label == positive).astype(np.int8)
        return code, lambda x, axis=-1: _f1_along(x, k, axis)
    raise KeyError(metric)


def _resample(data: tuple, fn, *, paired: bool, resamples: int, level: float, seed: int):
    """``scipy.stats.bootstrap`` (percentile method, seeded): its interval and its resampled statistics."""
    res = sps.bootstrap(
        data,
        fn,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        paired=paired,
        vectorized=True,
        batch=100,  # 100 resamples of 25,000 items at a time: memory stays small
        random_state=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high), res.bootstrap_distribution


def _tail_p(draws: np.ndarray, x: float = 0.0) -> float:
    """The bootstrap's two-sided p of "the true value is ``x``": twice the smaller tail of the resampled statistics
    beyond ``x``, at least 1 / resamples."""
    return float(min(1.0, max(2 * min(np.mean(draws <= x), np.mean(draws >= x)), 1 / len(draws))))


def bootstrap(
    items: dict[str, np.ndarray], metric: str, *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> Interval:
    """Percentile bootstrap over the test items of one run (``scipy.stats.bootstrap``)."""
    x, fn = statistic(items, metric)
    n = len(x)
    if n == 0:
        raise ValueError(f"no test items for {metric}")
    value = float(fn(x))
    if n == 1:
        return Interval(value, value, value, n, "one test item (no interval)")
    lo, hi, draws = _resample((x,), fn, paired=False, resamples=resamples, level=level, seed=seed)
    return Interval(value, lo, hi, n, f"percentile bootstrap over {n} test items ({resamples} resamples)", draws=draws)


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
    """``metric(a) - metric(b)`` on the same test items, resampled together (``scipy.stats.bootstrap``, paired);
    p = twice the smaller tail of the resampled differences beyond 0 (at least 1 / resamples)."""
    return _bootstrap_difference(a, b, metric, paired=True, resamples=resamples, level=level, seed=seed)


def _bootstrap_difference(a, b, metric: str, *, paired: bool, resamples: int, level: float, seed: int) -> Difference:
    xa, fn = statistic(a, metric)
    xb, _ = statistic(b, metric)
    na, nb = len(xa), len(xb)
    if paired and na != nb:
        raise ValueError(f"the two runs scored {na} and {nb} test items: a paired test needs the same items")
    lo, hi, draws = _resample(
        (xa, xb),
        lambda u, v, axis=-1: fn(u, axis=axis) - fn(v, axis=axis),
        paired=paired,
        resamples=resamples,
        level=level,
        seed=seed,
    )
    test = (
        f"paired bootstrap over {na} shared test items ({resamples} resamples)"
        if paired
        else f"unpaired bootstrap of {na} and {nb} test items ({resamples} resamples; items not pairable)"
    )
    return Difference(float(fn(xa) - fn(xb)), lo, hi, _tail_p(draws), min(na, nb), test, draws=draws)


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
    """``metric(a) - metric(b)`` with the two runs' items resampled independently (``scipy.stats.bootstrap``, not
    paired): for runs whose items cannot be paired (rebuilt from counts). Wider than the paired test: it cannot cancel
    per-item difficulty."""
    return _bootstrap_difference(a, b, metric, paired=False, resamples=resamples, level=level, seed=seed)
