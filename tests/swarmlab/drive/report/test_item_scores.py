"""The per-item score hook (``Metrics.item_scores``) of every task's meter: one score per test item whose mean is the
meter's own metric, so intervals over items describe the reported number."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tasks.clustering import DirectClusteringMeter, MogMeter
from tasks.image_generation import BitsPerDim
from tasks.metrics import ConfusionMatrix, MulticlassConfusion
from tasks.set_losses import hungarian_matched_nll, mog_log_likelihood, mog_params_from_output


def _batches(make, n=3):
    g = torch.Generator().manual_seed(0)
    return [make(g, b) for b in range(n)]


@pytest.mark.parametrize("meter_cls", [ConfusionMatrix, MulticlassConfusion])
def test_classification_items_are_correctness_and_per_review_loss(meter_cls):
    meter = meter_cls(3)
    meter.keep_items = True
    for logits, labels in _batches(
        lambda g, b: (torch.randn(5 + b, 3, generator=g), torch.randint(0, 3, (5 + b,), generator=g))
    ):
        meter.update(logits, {"label": labels}, F.cross_entropy(logits, labels))
    items, out = meter.item_scores(), meter.compute()
    assert len(items["accuracy"]) == 18 and set(np.unique(items["accuracy"])) <= {0.0, 1.0}
    assert items["accuracy"].mean() == pytest.approx(out["accuracy"])
    assert items["loss"].mean() == pytest.approx(out["loss"], rel=1e-6)
    assert np.array_equal(items["accuracy"], (items["pred"] == items["label"]).astype(float))


def test_direct_clustering_items_are_per_task_loss_accuracy_and_ari():
    meter = DirectClusteringMeter(4)
    meter.keep_items = True
    for b in range(2):
        g = torch.Generator().manual_seed(b)
        B, N = 3, 7
        logits = torch.randn(B, N, 4, generator=g)
        labels = torch.randint(0, 3, (B, N), generator=g)
        mask = torch.ones(B, N, dtype=torch.bool)
        mask[0, -2:] = False
        batch = {
            "x": torch.randn(B, N, 2),
            "labels": labels,
            "mask": mask,
            "k": torch.full((B,), 3),
            "means": torch.zeros(B, 3, 2),
            "covs": torch.zeros(B, 3, 2, 2),
        }
        meter.update(logits, batch, hungarian_matched_nll(F.log_softmax(logits, -1), labels, mask).mean())
    items, out = meter.item_scores(), meter.compute()
    assert {len(v) for v in items.values()} == {6}
    for name in ("loss", "matched_accuracy", "ari"):
        assert items[name].mean() == pytest.approx(out[name], rel=1e-6), name


def test_mog_items_are_per_task_log_likelihoods():
    meter = MogMeter(4)
    meter.keep_items = True
    g = torch.Generator().manual_seed(1)
    B, N = 4, 9
    out_raw = torch.randn(B, 4 * 5, generator=g)
    batch = {
        "x": torch.randn(B, N, 2, generator=g),
        "mask": torch.ones(B, N, dtype=torch.bool),
        "pi": torch.full((B, 4), 0.25),
        "mu": torch.randn(B, 4, 2, generator=g),
        "sigma": torch.full((B, 4, 2), 0.3),
    }
    pi, mu, sigma = mog_params_from_output(out_raw, 4, 2)
    meter.update(out_raw, batch, -mog_log_likelihood(batch["x"], batch["mask"], pi, mu, sigma).mean())
    items, out = meter.item_scores(), meter.compute()
    assert len(items["loglik"]) == B
    assert items["loglik"].mean() == pytest.approx(out["loglik"], rel=1e-6)
    assert np.allclose(items["loss"], -items["loglik"])


def test_image_items_are_bits_per_dim_per_image():
    meter = BitsPerDim(("a", "b"))
    meter.keep_items = True
    for nats in (torch.tensor([700.0, 800.0]), torch.tensor([900.0])):
        meter.update(
            {"nats": nats, "logits": torch.zeros(len(nats), 256, 1, 4, 4)},
            {"label": torch.zeros(len(nats), dtype=torch.long)},
        )
    items, out = meter.item_scores(), meter.compute()
    assert items["bits_per_dim"] == pytest.approx(np.array([700, 800, 900]) / 16 / math.log(2))
    assert items["bits_per_dim"].mean() == pytest.approx(out["bits_per_dim"])


def test_a_training_pass_keeps_nothing_per_item():
    meter = ConfusionMatrix(2)
    meter.update(torch.randn(4, 2), {"label": torch.zeros(4, dtype=torch.long)})
    assert "_items" not in meter.__dict__
    with pytest.raises(RuntimeError, match="keep_items"):
        meter.item_scores()
