"""Image generation (tasks/image_generation.py): bits/dim, the data stage on generated idx files, the sample
grid and class-conditional samples, the sample stage, and one slow data -> train -> evaluate -> sample run."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import models
from swarmlab.drive.params import load_params
from tests.conftest import SHARED_DATASETS
from swarmlab.errors import SwarmlabError
from swarmlab.plots import tile
from tasks.idx import write_idx
from tasks.image_generation import BitsPerDim, ImageGenerationTask, nats_per_image, split_indices


# ---------------------------------------------------------------------------------------------- helpers


def write_idx_folder(folder, *, n_train=40, n_test=20, size=(6, 5), approximate=False, pattern=None, seed=0):
    """An MNIST-layout folder of generated images (gzip idx), labels cycling 0..9; ``pattern(label, rng)``
    draws an image (default: uniform noise). ``approximate`` names the train images like MNIST's shipped file."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n, suffix in (("train", n_train, ".APPROX.gz" if approximate else ".gz"), ("t10k", n_test, ".gz")):
        labels = (np.arange(n) % 10).astype(np.uint8)
        images = np.stack([pattern(k, rng) if pattern else rng.integers(0, 256, size, dtype=np.uint8) for k in labels])
        write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images.astype(np.uint8), gzip=True)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels, gzip=True)
    return folder


def image_params(tmp_path, key="mnist", **options) -> dict:
    """Smoke params whose ``key`` section reads generated data under tmp_path."""
    params = copy.deepcopy(load_params(profile="smoke"))
    params["paths"] = {"datasets": str(tmp_path / "datasets")}
    params["tasks"][key]["options"].update(data_dir=str(tmp_path / "data" / key), **options)
    params["train"].update(device="cpu")
    return params


def brightness(label, rng, size=(4, 4)):
    """Class k: every pixel near 25 k (+-2), so a class-conditional model must use the label."""
    return np.clip(25 * int(label) + rng.integers(-2, 3, size), 0, 255).astype(np.uint8)


# -------------------------------------------------------------------------------------------- bits / dim


@pytest.mark.parametrize("permuted", [False, True])
def test_bits_per_dim_is_nats_per_sub_pixel_over_ln2(permuted):
    g = torch.Generator().manual_seed(0)
    meter, total_nats, total_dims = BitsPerDim(tuple("abc")), 0.0, 0
    for B in (3, 5, 1):  # batches of different sizes weigh by their images
        C, H, W = 2, 3, 4
        if permuted:  # the SWARM Transformer's layout: a (B, 256, C, H, W) view of (B, H, W, C, 256) memory
            logits = torch.randn(B, H, W, C, 256, generator=g).permute(0, 4, 3, 1, 2)
        else:
            logits = torch.randn(B, 256, C, H, W, generator=g)
        pixels = torch.randint(0, 256, (B, C, H, W), generator=g)
        labels = torch.arange(B) % 3
        # reference: -log p of each sub-pixel's value, from a plain log-softmax over the 256 values
        logp = logits.double().log_softmax(dim=1).gather(1, pixels[:, None]).squeeze(1)  # (B, C, H, W)
        total_nats += float(-logp.sum())
        total_dims += B * C * H * W
        outputs = {"logits": logits, "nats": nats_per_image(logits, pixels)}
        torch.testing.assert_close(outputs["nats"].double(), -logp.sum(dim=(1, 2, 3)), rtol=1e-6, atol=1e-4)
        task_loss = ImageGenerationTask.loss(None, outputs, {"pixels": pixels, "label": labels})
        torch.testing.assert_close(task_loss, F.cross_entropy(logits, pixels), rtol=1e-6, atol=1e-6)
        meter.update(outputs, {"pixels": pixels, "label": labels}, task_loss)
    result = meter.compute()
    nats_per_dim = total_nats / total_dims
    assert result["loss"] == pytest.approx(nats_per_dim, rel=1e-6)
    assert result["bits_per_dim"] == pytest.approx(nats_per_dim / math.log(2), rel=1e-6)
    assert result["bits_per_dim"] == pytest.approx(result["loss"] / math.log(2), rel=1e-12)
    assert set(meter.per_class()) == set("abc")


def test_a_uniform_model_scores_eight_bits_per_dim():
    meter = BitsPerDim(("x",))
    logits = torch.zeros(4, 256, 1, 3, 3)  # uniform over 256 values: exactly 8 bits per sub-pixel
    pixels = torch.randint(0, 256, (4, 1, 3, 3))
    meter.update(
        {"logits": logits, "nats": nats_per_image(logits, pixels)}, {"label": torch.zeros(4, dtype=torch.long)}
    )
    assert meter.compute()["bits_per_dim"] == pytest.approx(8.0, abs=1e-6)


# ------------------------------------------------------------------------------------------------- data


def test_split_indices_are_disjoint_seeded_and_nested():
    s = split_indices(100, 30, val_size=20, max_train=0, max_test=0, seed=3)
    assert len(s["val"]) == 20 and len(s["train"]) == 80 and s["test"].tolist() == list(range(30))
    assert sorted(np.concatenate([s["train"], s["val"]]).tolist()) == list(range(100))
    assert np.array_equal(s["val"], split_indices(100, 30, val_size=20, max_train=0, max_test=0, seed=3)["val"])
    assert not np.array_equal(s["val"], split_indices(100, 30, val_size=20, max_train=0, max_test=0, seed=4)["val"])
    small = split_indices(100, 30, val_size=20, max_train=10, max_test=7, seed=3)
    assert np.array_equal(small["val"], s["val"]) and set(small["train"]) <= set(s["train"]) and len(small["test"]) == 7
    assert set(small["train"]) <= set(split_indices(100, 30, val_size=20, max_train=30, max_test=0, seed=3)["train"])
    with pytest.raises(ValueError, match="leaves no training images"):
        split_indices(20, 5, val_size=20, max_train=0, max_test=0, seed=0)


@pytest.mark.parametrize("key, approximate", [("mnist", True), ("fashion_mnist", False)])
def test_data_stage_on_a_generated_idx_folder(tmp_path, monkeypatch, key, approximate):
    from pipelines.data import build

    monkeypatch.setenv("SWARMLAB_DATASETS", str(tmp_path / "datasets"))
    source = write_idx_folder(tmp_path / "datasets" / key, approximate=approximate)
    params = image_params(tmp_path, key, val_size=8, max_train=0, max_test=0)
    summary = build(params, key, report_root=tmp_path / "reports")
    out = tmp_path / "data" / key
    assert summary["train_rows"] == 32 and summary["val_rows"] == 8 and summary["test_rows"] == 20
    assert summary["approximate_train_images"] is approximate and ("note" in summary) is approximate
    assert summary["sources_known"] is False and len(summary["unknown_sources"]) == 4  # generated: not the known files
    assert json.loads((tmp_path / "reports" / "data" / key / "metrics.json").read_text()) == summary
    meta = json.loads((out / "meta.json").read_text())
    assert (
        meta["image_size"] == [1, 6, 5]
        and meta["num_classes"] == 10
        and meta["approximate_train_images"] is approximate
    )
    assert meta["approximate_test_images"] is False
    from tasks.idx import load_mnist_like

    train_src, test_src = load_mnist_like(source, "train"), load_mnist_like(source, "test")
    rows = {}
    for split, src in (("train", train_src), ("val", train_src), ("test", test_src)):
        with np.load(out / f"{split}.npz") as f:
            assert f["images"].dtype == np.uint8 and f["images"].shape[1:] == (1, 6, 5)
            assert np.array_equal(f["images"][:, 0], src.images[f["index"]])  # each row is its source image
            assert np.array_equal(f["labels"], src.labels[f["index"]])
            rows[split] = set(f["index"].tolist())
    with np.load(out / "train.npz") as tr, np.load(out / "test.npz") as te:  # values tested but never trained on
        unseen = sorted(set(np.unique(te["images"]).tolist()) - set(np.unique(tr["images"]).tolist()))
        share = np.isin(te["images"], unseen).mean()
    assert meta["test_values_unseen_in_train"] == unseen and summary["test_values_unseen_in_train"] == len(unseen) > 0
    assert meta["test_pixels_unseen_in_train"] == pytest.approx(share)
    assert not rows["train"] & rows["val"] and rows["train"] | rows["val"] == set(range(40))
    assert rows["test"] == set(range(20))  # the test split is kept whole

    task = ImageGenerationTask(params["tasks"][key]["options"])
    assert task.model_kwargs() == {"image_size": (1, 6, 5), "num_classes": 10}
    model = models.create_model("swarm_transformer_base", **task.model_kwargs(), dim=8, dim_hidden=8, n_iter=2)
    batch = task.train_data(model.cfg).get_batch(torch.tensor([0, 3]))
    assert batch["pixels"].dtype == torch.long and batch["pixels"].shape == (2, 1, 6, 5)
    assert (
        task.describe_data(task.train_data(model.cfg), task.eval_data("val", model.cfg))["approximate_train_images"]
        is approximate
    )


def test_data_stage_errors_are_one_line(tmp_path, monkeypatch):
    from pipelines.data import build

    monkeypatch.setenv("SWARMLAB_DATASETS", str(tmp_path / "datasets"))
    (tmp_path / "datasets").mkdir()
    with pytest.raises(SwarmlabError, match=r"datasets/mnist does not exist: point paths.datasets"):
        build(image_params(tmp_path), "mnist", report_root=tmp_path / "reports")
    write_idx_folder(tmp_path / "datasets" / "mnist", n_train=10)
    with pytest.raises(SwarmlabError, match=r"tasks.mnist.options: val_size=100 leaves no training images"):
        build(image_params(tmp_path, val_size=100), "mnist", report_root=tmp_path / "reports")
    (tmp_path / "datasets" / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b\x08junk")
    with pytest.raises(SwarmlabError, match=r"t10k-labels-idx1-ubyte.gz: damaged or truncated gzip"):
        build(image_params(tmp_path, val_size=2), "mnist", report_root=tmp_path / "reports")
    assert not (tmp_path / "data" / "mnist").exists()  # nothing half-written


def test_raw_sources_are_checked_against_their_known_digests(tmp_path, monkeypatch):
    """Fashion-MNIST's files in MNIST's folder (or a test file named as a training file) are refused before anything
    is built; the shared files are the known ones (issue 39)."""
    from pipelines.data import build

    shared = SHARED_DATASETS / "fashion_mnist"
    if not shared.is_dir():
        pytest.fail(f"{shared} is missing: the tests read the shared datasets (datasets/README.md)")
    monkeypatch.setenv("SWARMLAB_DATASETS", str(tmp_path / "datasets"))
    fake = tmp_path / "datasets" / "mnist"
    fake.mkdir(parents=True)
    for f in shared.glob("*-ubyte.gz"):
        (fake / f.name).symlink_to(f)
    with pytest.raises(SwarmlabError, match=r"train-images-idx3-ubyte.gz is fashion_mnist's train-images file"):
        build(image_params(tmp_path, val_size=8, max_train=16, max_test=8), "mnist", report_root=tmp_path / "r")
    assert not (tmp_path / "data" / "mnist").exists() and not (tmp_path / "r").exists()
    for kind in ("images-idx3", "labels-idx1"):  # the test split named as the training split: another role's bytes
        (fake / f"train-{kind}-ubyte.gz").unlink()
        (fake / f"train-{kind}-ubyte.gz").symlink_to(shared / f"t10k-{kind}-ubyte.gz")
    with pytest.raises(SwarmlabError, match=r"is fashion_mnist's t10k-images file .*not mnist's train-images"):
        build(image_params(tmp_path, val_size=8, max_train=16, max_test=8), "mnist", report_root=tmp_path / "r")
    monkeypatch.setenv("SWARMLAB_DATASETS", str(SHARED_DATASETS))
    params = image_params(tmp_path, "fashion_mnist", val_size=8, max_train=16, max_test=8)
    params["paths"] = {"datasets": str(SHARED_DATASETS)}
    summary = build(params, "fashion_mnist", report_root=tmp_path / "r")
    assert summary["sources_known"] is True and "unknown_sources" not in summary


def test_options_are_checked():
    with pytest.raises(
        SwarmlabError, match=r"tasks.image_generation.options: dataset must be one of mnist, fashion_mnist"
    ):
        ImageGenerationTask({"dataset": "cifar10"})


# ---------------------------------------------------------------------------------------------- samples


def test_tile_places_image_r_k_at_row_r_column_k():
    images = np.arange(3 * 4 * 1 * 2 * 5, dtype=np.int64).reshape(3, 4, 1, 2, 5)
    grid = tile(images, pad=1, fill=-1)
    assert grid.shape == (3 * 2 + 2, 4 * 5 + 3)
    for r in range(3):
        for k in range(4):
            assert np.array_equal(grid[r * 3 : r * 3 + 2, k * 6 : k * 6 + 5], images[r, k, 0])
    assert (grid[2] == -1).all() and (grid[:, 5] == -1).all()
    rgb = tile(np.zeros((2, 2, 3, 4, 4), dtype=np.uint8), pad=2)
    assert rgb.shape == (10, 10, 3)


@pytest.fixture(scope="module")
def trained_brightness_model(tmp_path_factory):
    """A tiny SWARM Transformer trained (300 steps, ~5 s) on 4x4 images whose brightness is the class
    (pixel ~ 25 k): the task, the model and smoke params reading its data. Shared by the module's tests."""
    from swarmlab.engine import TrainConfig, fit

    root = tmp_path_factory.mktemp("brightness")
    source = write_idx_folder(root / "datasets" / "mnist", n_train=220, n_test=20, approximate=True, pattern=brightness)
    params = image_params(root, val_size=20)
    task = ImageGenerationTask(params["tasks"]["mnist"]["options"])
    task.key = "mnist"
    (root / "data" / "mnist").mkdir(parents=True)
    task.build_data(root / "data" / "mnist", datasets=source.parent, seed=0)
    torch.manual_seed(0)
    model = models.create_model("swarm_transformer_base", **task.model_kwargs(), dim=16, dim_hidden=16, n_iter=2)
    cfg = TrainConfig(
        batch_size=50,
        lr=2e-2,
        weight_decay=0.0,
        optimizer="adam",
        max_epochs=0,
        max_steps=300,
        eval_every=300,
        patience=0,
        grad_clip=0.0,
        device="cpu",
        eval_batch_size=50,
    )
    result = fit(model, task, task.train_data(model.cfg), task.eval_data("val", model.cfg), cfg, root / "fit")
    assert result.best_val["bits_per_dim"] < 3.0  # the model has learned the classes' values
    return task, model.eval(), params


def test_samples_form_a_grid_one_row_per_class_and_follow_the_class(trained_brightness_model, tmp_path):
    from PIL import Image

    task, model, _ = trained_brightness_model
    out = tmp_path / "samples"
    out.mkdir()
    summary = task.sample(model, out, num_samples=34, temperature=1.0, seed=5, device=torch.device("cpu"), name="tiny")
    assert summary["samples"] == 30 and summary["per_class"] == 3 and summary["approximate_train_images"] is True
    with np.load(out / "samples.npz") as f:
        images, labels = f["images"], f["labels"]
    assert images.shape == (30, 1, 4, 4) and images.dtype == np.uint8
    assert labels.tolist() == [k for k in range(10) for _ in range(3)]  # class-major: row k of the grid is class k
    means = images.reshape(10, 3, -1).mean(axis=(1, 2))  # per class
    assert np.corrcoef(means, 25 * np.arange(10))[0, 1] > 0.95, means  # the samples follow their class
    assert means[9] - means[0] > 150, means
    with Image.open(out / "samples.png") as png:
        assert png.size[0] > 100 and png.size[1] > 100
    again = tmp_path / "again"
    again.mkdir()
    task.sample(model, again, num_samples=34, temperature=1.0, seed=5, device=torch.device("cpu"), name="tiny")
    with np.load(again / "samples.npz") as f:
        assert np.array_equal(f["images"], images)  # seeded


def test_sample_stage_writes_per_model_folders_atomically(trained_brightness_model, tmp_path):
    from pipelines.sample import sample

    task, model, params = trained_brightness_model
    params = copy.deepcopy(params)
    params["tasks"]["mnist"].update(
        models=["swarm_transformer_base"], model_overrides={"dim": 16, "dim_hidden": 16, "n_iter": 2}
    )
    train_root, reports = tmp_path / "outputs" / "train", tmp_path / "reports"
    with pytest.raises(SwarmlabError, match=r"best.pt is missing: train swarm_transformer_base-seed0 on mnist first"):
        sample(params, "mnist", train_root=train_root, report_root=reports, tracking=False)
    assert not (reports / "sample" / "mnist").exists()
    run_dir = train_root / "mnist" / "swarm_transformer_base-seed0"
    run_dir.mkdir(parents=True)
    torch.save(model.state_dict(), run_dir / "best.pt")
    with pytest.raises(SwarmlabError, match=r"run.json is missing: nothing records which run wrote"):
        sample(params, "mnist", train_root=train_root, report_root=reports, tracking=False)
    (run_dir / "run.json").write_text(json.dumps({"model": "swarm_transformer_base", "task": "mnist", "seed": 1}))
    with pytest.raises(SwarmlabError, match=r"holds a run of model 'swarm_transformer_base', seed 1, task 'mnist'"):
        sample(
            params, "mnist", train_root=train_root, report_root=reports, tracking=False
        )  # a folder copied from seed 1
    (run_dir / "run.json").write_text(json.dumps({"model": "swarm_transformer_base", "task": "mnist", "seed": 0}))
    for count in (5, 25):  # fewer than one per class of 10, or not a whole number of rows
        params["sample"].update(num_samples=count)
        with pytest.raises(SwarmlabError, match=rf"sample.num_samples is {count}, but mnist draws one row per class"):
            sample(params, "mnist", train_root=train_root, report_root=reports, tracking=False)
    assert not (reports / "sample" / "mnist").exists()
    params["sample"].update(num_samples=10)
    summary = sample(params, "mnist", train_root=train_root, report_root=reports, tracking=False)
    folder = reports / "sample" / "mnist"
    assert sorted(p.name for p in folder.iterdir()) == ["summary.json", "swarm_transformer_base-seed0"]
    assert {p.name for p in (folder / "swarm_transformer_base-seed0").iterdir()} == {"samples.png", "samples.npz"}
    assert (
        json.loads((folder / "summary.json").read_text()) == summary
        and summary["swarm_transformer_base-seed0"]["samples"] == 10
    )


def test_sample_stage_refuses_a_task_that_generates_nothing(tmp_path):
    from pipelines.sample import sample

    with pytest.raises(
        SwarmlabError, match=r"sample@imdb: the sample stage serves only generative tasks \(mnist, fashion_mnist\)"
    ):
        sample(load_params(profile="smoke"), "imdb", report_root=tmp_path, tracking=False)


# ------------------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_data_train_evaluate_sample_end_to_end(tmp_path, monkeypatch):
    """The four generic stages on generated 8x8 data, as dvc runs them (minus dvc): every output says that the
    (MNIST-named) training images are approximate."""
    from pipelines.data import build
    from pipelines.evaluate import evaluate
    from pipelines.sample import sample
    from pipelines.train import train

    monkeypatch.setenv("SWARMLAB_DATASETS", str(tmp_path / "datasets"))
    write_idx_folder(tmp_path / "datasets" / "mnist", n_train=80, n_test=30, size=(8, 8), approximate=True)
    params = image_params(tmp_path, val_size=20, max_train=0, max_test=0)
    params["tasks"]["mnist"].update(model_overrides={"dim": 8, "dim_hidden": 8, "n_iter": 2})
    params["tasks"]["mnist"]["train"].update(max_steps=6, eval_every=3, batch_size=16)
    out_root, reports = tmp_path / "outputs" / "train", tmp_path / "reports"
    data = build(params, "mnist", report_root=reports)
    trained = train(params, "mnist", out_root=out_root, report_root=reports)["swarm_transformer_small-seed0"]
    evaluated = evaluate(params, "mnist", train_root=out_root, report_root=reports, tracking=False)[
        "swarm_transformer_small-seed0"
    ]
    sampled = sample(params, "mnist", train_root=out_root, report_root=reports)["swarm_transformer_small-seed0"]

    assert data["approximate_train_images"] is True
    assert trained["steps"] == 6 and trained["data"]["approximate_train_images"] is True
    assert trained["val_bits_per_dim"] == pytest.approx(trained["val_loss"] / math.log(2))
    assert evaluated["test_rows"] == 30 and 0 < evaluated["test_bits_per_dim"] < 9
    assert evaluated["approximate_train_images"] is True and len(evaluated["bits_per_dim_per_class"]) == 10
    assert (reports / "evaluate" / "mnist" / "plots" / "bits_per_class_swarm_transformer_small-seed0.png").is_file()
    assert sampled["samples"] == 20 and sampled["approximate_train_images"] is True
    with np.load(reports / "sample" / "mnist" / "swarm_transformer_small-seed0" / "samples.npz") as f:
        assert f["images"].shape == (20, 1, 8, 8)
    from mlflow.tracking import MlflowClient  # the grid is an artifact of the run (#38: sample grids in MLflow)

    client = MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("mnist").experiment_id])
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "samples")}
    assert {"samples/samples.png", "samples/samples.npz"} <= logged, logged  # to the training run (one run)
    (data,) = run.inputs.dataset_inputs  # MLflow's Datasets column: the data trained on, by its fingerprint
    assert data.dataset.name == "mnist" and len(data.dataset.digest) >= 16
    assert [(t.key, t.value) for t in data.tags] == [("mlflow.data.context", "training")]
    # the best checkpoint as an MLflow model (#38): listed as the run's output, loaded by MLflow from its own copy
    # (models from code, weights_only), predicting what load_best's model does on validation items, dict and all
    (output,) = run.outputs.model_outputs
    logged_model = client.get_logged_model(output.model_id)
    assert output.step == trained["best_step"] and logged_model.source_run_id == run.info.run_id
    assert logged_model.experiment_id == run.info.experiment_id
    assert logged_model.name == "mnist-swarm_transformer_small-seed0"
    import mlflow.pyfunc
    import torch

    from swarmlab.drive.run_config import load_best
    from swarmlab.drive.spec import resolve

    loaded = mlflow.pyfunc.load_model(f"models:/{output.model_id}")
    assert sorted(loaded.metadata.get_input_schema().input_names()) == ["label", "pixels"]
    assert loaded.metadata.get_output_schema().input_names() == ["logits", "nats"]
    spec = resolve(params, "evaluate", "mnist")
    task = spec.task.build()
    best = load_best(task, spec.runs[0], out_root).eval()
    val = task.eval_data("val", best.cfg).get_batch(torch.arange(5))
    predicted = loaded.predict({"pixels": val["pixels"].numpy(), "label": val["label"].numpy()})
    with torch.inference_mode():
        direct = task.forward(best, val)
    assert np.array_equal(predicted["logits"], direct["logits"].numpy())
    assert np.array_equal(predicted["nats"], direct["nats"].numpy())
    assert {a.path for a in client.list_artifacts(run.info.run_id)}.isdisjoint({"checkpoint"})  # not twice
