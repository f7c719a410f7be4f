"""Intervals and paired tests: deterministic, of the right width, and honest about noise."""

from __future__ import annotations

import numpy as np
import pytest

from swarmlab.report.stats import across_seeds, bootstrap, paired_bootstrap, paired_seeds


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
