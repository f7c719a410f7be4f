"""Intervals and paired tests: deterministic, of the right width, and honest about noise."""

from __future__ import annotations

import numpy as np
import pytest

from swarmlab.drive.report.stats import across_seeds, bootstrap, paired_bootstrap, paired_seeds


def test_bootstrap_is_deterministic_and_near_the_normal_interval():
    rng = np.random.default_rng(5)
    items = {"accuracy": (rng.random(2000) < 0.8).astype(float)}
    a, b = bootstrap(items, "accuracy"), bootstrap(items, "accuracy")
    assert a == b and "bootstrap over 2000 test items" in a.test
    p = items["accuracy"].mean()
    half = 1.96 * np.sqrt(p * (1 - p) / 2000)
    assert a.lo == pytest.approx(p - half, abs=0.005) and a.hi == pytest.approx(p + half, abs=0.005)


def test_a_small_test_split_gives_a_wide_interval():
    items = {"accuracy": np.array([1.0] * 80 + [0.0] * 80)}  # 160 rows, the cpu profile's ListOps test split
    iv = bootstrap(items, "accuracy")
    assert iv.hi - iv.lo > 0.14  # about +-8 points


def test_f1_is_recomputed_on_every_resample():
    pred = np.array([1, 1, 0, 0, 1, 0, 1, 1] * 20)
    label = np.array([1, 0, 0, 1, 1, 0, 1, 0] * 20)
    iv = bootstrap({"pred": pred, "label": label, "accuracy": (pred == label).astype(float)}, "f1")
    tp = np.sum((pred == 1) & (label == 1))
    assert iv.value == pytest.approx(2 * tp / (np.sum(pred == 1) + np.sum(label == 1)))
    assert iv.lo < iv.value < iv.hi


def test_paired_bootstrap_sees_a_consistent_small_gain_that_unpaired_noise_hides():
    rng = np.random.default_rng(1)
    hard = rng.normal(0, 1.0, 500)  # per-item difficulty shared by both models
    a, b = {"loss": hard + 0.05 + rng.normal(0, 0.01, 500)}, {"loss": hard}
    d = paired_bootstrap(a, b, "loss")
    assert d.significant and d.lo > 0 and d.p < 0.01
    ia, ib = bootstrap(a, "loss"), bootstrap(b, "loss")
    assert not (ia.lo > ib.hi)  # the separate intervals overlap: only the paired test sees it
    with pytest.raises(ValueError, match="same items"):
        paired_bootstrap(a, {"loss": hard[:10]}, "loss")


def test_across_seeds_and_paired_seeds():
    iv = across_seeds([0.80, 0.82, 0.81])
    assert iv.value == pytest.approx(0.81) and iv.lo < 0.80 and iv.hi > 0.82 and iv.n == 3
    d = paired_seeds([0.80, 0.82, 0.81], [0.79, 0.815, 0.80])
    assert d.diff > 0 and "paired t-test across 3 matched seeds" == d.test
    tie = paired_seeds([0.8, 0.7], [0.7, 0.8])
    assert not tie.significant
    with pytest.raises(ValueError):
        across_seeds([0.8])


def test_p_against_a_boundary_agrees_with_the_interval():
    """At the 95% level, p < 0.05 exactly where the t-interval excludes the boundary; against 0 it is the paired
    t-test's own p (scipy.stats.ttest_rel)."""
    from scipy import stats as sps

    a, b = [0.80, 0.85, 0.90, 0.83], [0.76, 0.79, 0.87, 0.80]
    d = paired_seeds(a, b)
    assert d.p_against(0.0) == pytest.approx(sps.ttest_rel(a, b).pvalue) == pytest.approx(d.p)
    for x in (d.lo - 1e-6, d.hi + 1e-6):
        assert d.p_against(x) < 0.05
    for x in (d.lo + 1e-6, d.hi - 1e-6, d.diff):
        assert d.p_against(x) > 0.05
    iv = across_seeds([0.70, 0.72, 0.71])
    assert iv.p_against(iv.lo - 1e-6) < 0.05 < iv.p_against(iv.lo + 1e-6)
    rng = np.random.default_rng(1)
    boot = bootstrap({"accuracy": (rng.random(1000) < 0.7).astype(float)}, "accuracy")
    assert boot.p_against(boot.lo - 0.01) < 0.05 < boot.p_against(boot.value)


def test_fdr_is_benjamini_hochberg():
    from swarmlab.drive.report.stats import fdr

    ps = [0.01, 0.04, 0.03, 0.20]
    # by hand: sorted 0.01, 0.03, 0.04, 0.20 -> 0.01*4/1, 0.03*4/2, 0.04*4/3, 0.20; then the running minimum from the top
    assert fdr(ps) == pytest.approx([0.04, 0.0533333, 0.0533333, 0.20], rel=1e-5)
    assert fdr([]) == []


def test_seeds_for_power_grows_as_the_effect_shrinks_against_the_spread():
    from swarmlab.drive.report.stats import seeds_for_power

    diffs = [-0.253, -0.232, -0.117]  # the PMA grid's per-seed differences: d = 2.7
    assert seeds_for_power(diffs) == 4
    assert seeds_for_power(diffs, effect=0.05) > 10  # a quarter of the effect needs far more seeds
    assert seeds_for_power([0.1, 0.1]) is None  # no spread to plan with


def _slow_percentile(samples, fn, paired: bool, resamples: int = 2000, seed: int = 3):
    """A plain loop bootstrap: the reference the scipy-based one must agree with (not draw for draw: its own RNG)."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        if paired:
            i = rng.integers(0, len(samples[0]), len(samples[0]))
            draws.append(fn(*[s[i] for s in samples]))
        else:
            draws.append(fn(*[s[rng.integers(0, len(s), len(s))] for s in samples]))
    return np.quantile(draws, [0.025, 0.975])


def _f1(pred, label):
    tp = np.sum((pred == 1) & (label == 1))
    return 2 * tp / (np.sum(pred == 1) + np.sum(label == 1))


def test_the_scipy_bootstraps_agree_with_a_slow_loop_reference():
    """bootstrap / paired_bootstrap / unpaired_bootstrap run on scipy.stats.bootstrap with the items' predictions and
    labels coded into one column: F1 and the paired and unpaired differences agree with a loop over resamples of the
    raw columns, to the Monte-Carlo error of 2,000 resamples."""
    from swarmlab.drive.report.stats import unpaired_bootstrap

    rng = np.random.default_rng(11)
    label = (rng.random(3000) < 0.5).astype(int)
    pa = np.where(rng.random(3000) < 0.85, label, 1 - label)
    pb = np.where(rng.random(3000) < 0.80, label, 1 - label)
    a, b = {"pred": pa, "label": label}, {"pred": pb, "label": label}
    iv = bootstrap(a, "f1")
    lo, hi = _slow_percentile((pa, label), _f1, paired=True)
    assert iv.value == pytest.approx(_f1(pa, label)) and iv.lo == pytest.approx(lo, abs=0.004)
    assert iv.hi == pytest.approx(hi, abs=0.004)
    d = paired_bootstrap(a, b, "f1")
    lo, hi = _slow_percentile((pa, pb, label), lambda x, y, t: _f1(x, t) - _f1(y, t), paired=True)
    assert d.diff == pytest.approx(_f1(pa, label) - _f1(pb, label))
    assert d.lo == pytest.approx(lo, abs=0.005) and d.hi == pytest.approx(hi, abs=0.005) and d.p < 0.01
    u = unpaired_bootstrap(a, b, "f1")
    lo, hi = _slow_percentile(
        (np.stack([pa, label], 1), np.stack([pb, label], 1)),
        lambda x, y: _f1(x[:, 0], x[:, 1]) - _f1(y[:, 0], y[:, 1]),
        paired=False,
    )
    assert u.lo == pytest.approx(lo, abs=0.006) and u.hi == pytest.approx(hi, abs=0.006)
    assert u.hi - u.lo > d.hi - d.lo  # pairing cancels the shared items' difficulty
