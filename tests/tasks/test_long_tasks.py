"""The long-document tasks (lra_text, listops, arxiv11) on the contract: data stages on tiny inputs, batch
trimming that leaves every model's logits unchanged, the multi-class metrics against a direct computation,
every model of the track at 4096 tokens, and (slow) data -> train -> evaluate end to end."""

from __future__ import annotations

import copy
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from swarmlab.drive.params import load_params
from swarmlab.drive.runs import make_task, model_names
from swarmlab.drive.run_config import build_model, model_overrides
from swarmlab.errors import SwarmlabError
from tasks.long_data import (
    ARXIV11_CATEGORIES,
    LISTOPS_VOCAB,
    LongDataError,
    NUM_SPECIAL,
    decode_bytes,
    evaluate_listops,
)
from tasks.long_documents import cap_rows, read_split
from tasks.metrics import ConfusionMatrix, MulticlassConfusion, f1_scores
from tasks.text_data import LengthGroupedTextDataset, TokenizedTextDataset
from tests.conftest import reviews

LONG_TASKS = ("lra_text", "listops")


# ------------------------------------------------------------------------------------------------ metrics


def direct_scores(truth: np.ndarray, pred: np.ndarray, k: int) -> dict:
    """Accuracy, per-class / macro / micro F1 straight from the label arrays (no confusion matrix)."""
    per_class, present = [], []
    for c in range(k):
        tp = np.sum((pred == c) & (truth == c))
        fp = np.sum((pred == c) & (truth != c))
        fn = np.sum((pred != c) & (truth == c))
        per_class.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
        present.append(bool(tp + fp + fn))
    tp = np.sum(pred == truth)
    errors = np.sum(pred != truth)  # each error is one false positive and one false negative
    return {
        "accuracy": tp / len(truth),
        "per_class": per_class,
        "macro_f1": float(np.mean([f for f, p in zip(per_class, present) if p])),
        "micro_f1": 2 * tp / (2 * tp + 2 * errors),
    }


def stream(meter, truth: np.ndarray, pred: np.ndarray, k: int, batch: int = 7):
    for s in range(0, len(truth), batch):
        logits = torch.nn.functional.one_hot(torch.from_numpy(pred[s : s + batch]), k).float()
        meter.update(logits, {"label": torch.from_numpy(truth[s : s + batch])}, torch.tensor(0.5))
    return meter


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multiclass_metrics_equal_a_direct_computation(seed):
    rng = np.random.default_rng(seed)
    k = 10
    truth = rng.integers(0, k - 1, 203)  # class 9 never true ...
    pred = np.where(rng.random(203) < 0.4, truth, rng.integers(0, k - 1, 203))  # ... nor predicted: not averaged
    pred[:80] = 3  # a skew towards class 3, so that macro and micro differ
    meter = stream(MulticlassConfusion(k, class_names=[str(c) for c in range(k)]), truth, pred, k)
    got, extras, want = meter.compute(), meter.extras(), direct_scores(truth, pred, k)
    assert set(got) == {"accuracy", "macro_f1", "micro_f1", "loss"}
    assert got["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
    assert got["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-12)
    assert got["micro_f1"] == pytest.approx(want["micro_f1"], abs=1e-12) and got["micro_f1"] == pytest.approx(
        got["accuracy"]
    )
    assert got["macro_f1"] != pytest.approx(got["micro_f1"], abs=1e-3)
    assert [extras["per_class_f1"][str(c)] for c in range(k)] == pytest.approx(want["per_class"], abs=1e-12)
    assert np.array_equal(
        np.array(extras["confusion_matrix"]),
        np.array([[np.sum((truth == t) & (pred == p)) for p in range(k)] for t in range(k)]),
    )
    assert sum(extras["per_class_support"].values()) == len(truth) and got["loss"] == pytest.approx(0.5)


def test_a_class_true_but_never_predicted_counts_with_f1_zero():
    """scikit-learn's f1_score(average="macro", zero_division=0) convention, computed here without it."""
    rng = np.random.default_rng(7)
    truth, pred = rng.integers(0, 6, 150), rng.integers(0, 5, 150)  # class 5 true but never predicted: F1 0, averaged
    meter = stream(MulticlassConfusion(6, class_names=[str(c) for c in range(6)]), truth, pred, 6)
    got, want = meter.compute(), direct_scores(truth, pred, 6)
    assert meter.extras()["per_class_f1"]["5"] == 0.0 and want["per_class"][5] == 0.0
    assert got["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-12)
    assert got["macro_f1"] == pytest.approx(sum(want["per_class"]) / 6, abs=1e-12)  # all six classes averaged
    per_class, _, _, _ = f1_scores(
        torch.tensor([[np.sum((truth == t) & (pred == p)) for p in range(6)] for t in range(6)])
    )
    assert per_class.tolist() == pytest.approx(want["per_class"], abs=1e-12)


def test_binary_keys_of_imdb_are_unchanged_and_lra_text_adds_macro_micro():
    truth = np.array([0, 1, 1, 0, 1, 1, 0, 0, 1])
    pred = np.array([0, 1, 0, 0, 1, 1, 1, 0, 1])
    imdb = stream(ConfusionMatrix(2, positive=1), truth, pred, 2).compute()
    assert set(imdb) == {"accuracy", "precision", "recall", "f1", "loss"}
    lra = stream(MulticlassConfusion(2, positive=1), truth, pred, 2).compute()
    assert {k: lra[k] for k in imdb} == pytest.approx(imdb)
    assert lra["micro_f1"] == pytest.approx(lra["accuracy"]) and "macro_f1" in lra


def test_metric_update_never_reads_a_value():
    """Tensors on the meta device have no data: any host read in ``update`` (.item(), .cpu(), float()) raises."""
    meter = MulticlassConfusion(10)
    logits = torch.randn(4, 10, device="meta")
    meter.update(logits, {"label": torch.zeros(4, dtype=torch.long, device="meta")}, torch.zeros((), device="meta"))
    assert meter.counts.device.type == "meta"


# --------------------------------------------------------------------------------------------- data stages


def long_params(tmp_path, **options) -> dict:
    """The smoke profile with the long tasks' folders under tmp_path and tiny models."""
    params = copy.deepcopy(load_params(profile="smoke"))
    for key in ("lra_text", "listops", "arxiv11"):
        section = params["tasks"][key]
        section["options"]["data_dir"] = str(tmp_path / "data" / key)
        section["options"].update(options.get(key, {}))
        section["model_overrides"] = {"d_model": 16}
    params["tasks"]["lra_text"]["options"]["source_dir"] = str(tmp_path / "data" / "prepared")
    params["train"].update(device="cpu", amp="fp32")
    return params


def write_prepared(folder, n_per_label=12, long_every=5):
    """A prepared-IMDB folder (uid/text/label shards), some reviews longer than 256 bytes, one with non-ASCII."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_per_label), ("val", 4), ("test", 5)):
        rows = reviews(n)
        texts = [r["text"] * (12 if i % long_every == 0 else 1) for i, r in enumerate(rows)]
        texts[0] = "Café crème — " + texts[0]
        table = pa.table(
            {
                "uid": [f"{split}/{i}" for i in range(len(rows))],
                "text": texts,
                "label": pa.array([r["label"] for r in rows], pa.int8()),
            }
        )
        for k, part in enumerate((table.slice(0, len(rows) // 2), table.slice(len(rows) // 2))):
            pq.write_table(part, folder / f"{split}-{k:03d}.parquet")
    return folder


def test_lra_text_data_stage_writes_the_bytes_of_each_review(tmp_path):
    from pipelines.data import build

    write_prepared(tmp_path / "data" / "prepared")
    params = long_params(tmp_path, lra_text={"max_len": 256, "max_train": 10, "max_val": 0, "max_test": 0})
    summary = build(params, "lra_text", report_root=tmp_path / "reports")
    assert (summary["train_rows"], summary["val_rows"], summary["test_rows"]) == (10, 8, 10)
    assert summary["train_cut_at_max_len"] > 0 and summary["seq_len"] == 256
    assert json.loads((tmp_path / "reports" / "data" / "lra_text" / "metrics.json").read_text()) == summary

    folder = tmp_path / "data" / "lra_text"
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["vocab_size"], meta["num_classes"], meta["seq_len"]) == (259, 2, 256)
    assert meta["splits"]["train"]["label_counts"] == [5, 5]  # the cap is stratified
    ids, lengths, labels = read_split(folder, "test", 256)
    source = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "data" / "prepared").glob("test-*"))])
    uids = pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("test-*"))]).column("uid").to_pylist()
    texts = dict(zip(source.column("uid").to_pylist(), source.column("text").to_pylist()))
    labels_by_uid = dict(zip(source.column("uid").to_pylist(), source.column("label").to_pylist()))
    for row, uid in enumerate(uids):
        raw = texts[uid].encode("utf-8")[:256]
        assert decode_bytes(ids[row]) == raw and lengths[row] == len(raw) and labels[row] == labels_by_uid[uid]
        assert (ids[row, lengths[row] :] == 0).all() and (ids[row, : lengths[row]] >= NUM_SPECIAL).all()


def test_lra_text_without_prepared_data_says_which_stage_to_run(tmp_path):
    from pipelines.data import build

    with pytest.raises(SwarmlabError, match=r"no train-\*.parquet in .*prepared: run the prepare stage first"):
        build(long_params(tmp_path), "lra_text", report_root=tmp_path)
    assert not (tmp_path / "data" / "lra_text").exists()


def test_listops_data_stage_labels_equal_the_evaluator_and_splits_are_disjoint(tmp_path):
    from pipelines.data import build

    params = long_params(
        tmp_path,
        listops={
            "train_rows": 40,
            "val_rows": 10,
            "test_rows": 10,
            "max_depth": 5,
            "min_length": 10,
            "max_length": 120,
            "max_len": 128,
        },
    )
    build(params, "listops", report_root=tmp_path / "reports")
    folder = tmp_path / "data" / "listops"
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["vocab_size"], meta["num_classes"], meta["seq_len"]) == (18, 10, 128)
    seen = set()
    for split, n in (("train", 40), ("val", 10), ("test", 10)):
        ids, lengths, labels = read_split(folder, split, 128)
        assert len(labels) == n and meta["splits"][split]["max_depth"] <= 5
        for row in range(n):
            text = " ".join(LISTOPS_VOCAB[i] for i in ids[row, : lengths[row]])
            assert evaluate_listops(text) == labels[row] and 10 < lengths[row] < 120
            assert text not in seen
            seen.add(text)
    first = read_split(folder, "train", 128)
    build(params, "listops", report_root=tmp_path / "reports")  # the same seed gives the same data
    assert all(np.array_equal(a, b) for a, b in zip(first, read_split(folder, "train", 128)))


def write_arxiv_folders(root, per_class=5):
    for name in ARXIV11_CATEGORIES:
        (root / name.lower()).mkdir(parents=True)
        for i in range(per_class):
            (root / name.lower() / f"{i}.txt").write_text(f"Paper {i} on {name}. " * (3 + i), encoding="utf-8")
    return root


@pytest.mark.parametrize("layout", ["folders", "jsonl"])
def test_arxiv11_data_stage_reads_both_layouts(tmp_path, layout):
    from pipelines.data import build

    source = tmp_path / "arxiv"
    if layout == "folders":
        write_arxiv_folders(source, per_class=10)
    else:
        source.mkdir()
        for split, n in (("train", 10), ("test", 2)):
            lines = [
                json.dumps({"text": f"{name} document {i}", "label": name})
                for name in ARXIV11_CATEGORIES
                for i in range(n)
            ]
            (source / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    params = long_params(
        tmp_path, arxiv11={"source": str(source), "max_len": 64, "val_fraction": 0.1, "test_fraction": 0.2}
    )
    summary = build(params, "arxiv11", report_root=tmp_path)
    want = (
        (77, 11, 22) if layout == "folders" else (99, 11, 22)
    )  # folders: 10 per class -> 7/1/2; jsonl: val from train
    assert (summary["train_rows"], summary["val_rows"], summary["test_rows"]) == want
    task = make_task(params, "arxiv11")
    assert task.model_kwargs() == {"vocab_size": 259, "num_classes": 11, "seq_len": 64}
    assert np.bincount(task.eval_data("test", None).labels.numpy(), minlength=11).tolist() == [2] * 11


def test_arxiv11_without_a_source_or_with_a_malformed_one_is_a_clear_error(tmp_path):
    from pipelines.data import build

    with pytest.raises(SwarmlabError, match="tasks.arxiv11.options.source is empty: .* set it to your copy"):
        build(long_params(tmp_path), "arxiv11", report_root=tmp_path)
    source = write_arxiv_folders(tmp_path / "arxiv")
    (source / "cs.xx").mkdir()
    with pytest.raises(LongDataError, match="cs.xx: unknown category folder") as info:
        build(long_params(tmp_path, arxiv11={"source": str(source)}), "arxiv11", report_root=tmp_path)
    assert isinstance(info.value, SwarmlabError) and "\n" not in str(info.value)
    assert not (tmp_path / "data" / "arxiv11").exists()


@pytest.mark.parametrize(
    ("key", "options", "match"),
    [
        ("listops", {"max_len": 100}, "max_len=100 cannot hold the longest expression"),
        ("listops", {"min_length": 300}, "need 0 <= min_length < max_length - 1"),
        ("lra_text", {"max_train": -1}, "max_train must be >= 0"),
        ("lra_text", {"trim_multiple": 0}, "trim_multiple must be >= 1"),
        ("arxiv11", {"encoding_errors": "latin1"}, "encoding_errors must be strict, replace or ignore"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, key, options, match):
    with pytest.raises(SwarmlabError, match=match) as info:
        make_task(long_params(tmp_path, **{key: options}), key)
    assert f"tasks.{key}.options" in str(info.value) and "\n" not in str(info.value)


def test_cap_rows_is_stratified_seeded_and_exact():
    labels = np.array([0] * 70 + [1] * 20 + [2] * 10)
    keep = cap_rows(labels, 21, seed=3)
    assert len(keep) == 21 and np.bincount(labels[keep]).tolist() == [15, 4, 2]
    assert np.array_equal(keep, cap_rows(labels, 21, seed=3)) and not np.array_equal(keep, cap_rows(labels, 21, seed=4))
    assert np.array_equal(cap_rows(labels, 0, seed=0), np.arange(100))


# ------------------------------------------------------------------------------------------------ trimming


def ragged(n=24, L=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, L + 1, (n,), generator=g)
    ids = torch.randint(3, 259, (n, L), generator=g)
    ids[torch.arange(L)[None, :] >= lengths[:, None]] = 0
    return ids.to(torch.int16), lengths, torch.randint(0, 2, (n,), generator=g)


def test_trimmed_batches_drop_only_padding_and_the_plan_groups_lengths():
    ids, lengths, labels = ragged()
    full = TokenizedTextDataset(ids, lengths, labels, sep_id=None)
    trimmed = LengthGroupedTextDataset(ids, lengths, labels, trim_multiple=128)
    idx = torch.tensor([3, 7, 11])
    a, b = full.get_batch(idx), trimmed.get_batch(idx)
    width = b["input_ids"].shape[1]
    assert width % 128 == 0 and width >= int(lengths[idx].max()) and width - 128 < int(lengths[idx].max())
    assert torch.equal(a["input_ids"][:, :width], b["input_ids"]) and not a["attention_mask"][:, width:].any()
    plan = trimmed.batch_plan(4, torch.Generator().manual_seed(0))
    assert sorted(torch.cat(plan).tolist()) == list(range(len(ids)))  # every row once
    assert all(torch.equal(p, q) for p, q in zip(plan, trimmed.batch_plan(4, torch.Generator().manual_seed(0))))
    spread = np.mean([float(lengths[p].max() - lengths[p].min()) for p in plan])
    shuffled = np.mean([float(lengths[p].max() - lengths[p].min()) for p in torch.randperm(24).split(4)])
    assert spread < shuffled / 2
    ordered = trimmed.sorted_by_length()
    assert (ordered.lengths[:-1] >= ordered.lengths[1:]).all() and ordered.get_batch(torch.tensor([23]))[
        "input_ids"
    ].shape[1] == 128
    assert isinstance(ordered.to("cpu"), LengthGroupedTextDataset) and isinstance(
        trimmed.truncated(256), LengthGroupedTextDataset
    )


def cpu_models(key="lra_text"):
    params = load_params(profile="cpu")
    return params, model_names(params, key)


class _Shapes:
    """A stand-in task for building models without a data folder (model_kwargs only)."""

    model_kind, name = "text", "lra_text"

    def __init__(self, key, vocab, classes, seq_len):
        self.key, self._kw = key, {"vocab_size": vocab, "num_classes": classes, "seq_len": seq_len}

    def model_kwargs(self):
        return dict(self._kw)


@pytest.mark.parametrize("name", cpu_models()[1])
def test_trimming_leaves_every_long_models_logits_unchanged(name):
    """What justifies trimming: each model of the track masks padding, so cutting it off changes nothing."""
    params, _ = cpu_models()
    overrides = {**model_overrides(params, "lra_text", name), "d_model": 32}
    torch.manual_seed(0)
    model = build_model(name, _Shapes("lra_text", 259, 2, 512), overrides).eval()
    ids, lengths, labels = ragged(n=6, L=512, seed=1)
    lengths[0] = 100  # the longest row of the batch below: trimmed to 128 of 512 columns
    ids[0, 100:] = 0
    lengths[1:3] = torch.tensor([40, 7])
    full = TokenizedTextDataset(ids, lengths, labels, sep_id=None)
    trimmed = LengthGroupedTextDataset(ids, lengths, labels, trim_multiple=128)
    idx = torch.tensor([0, 1, 2])
    a, b = full.get_batch(idx), trimmed.get_batch(idx)
    assert b["input_ids"].shape == (3, 128)
    with torch.no_grad():
        torch.testing.assert_close(
            model(b["input_ids"], b["attention_mask"]), model(a["input_ids"], a["attention_mask"]), rtol=1e-4, atol=1e-5
        )


def test_trimming_would_change_a_model_that_attends_to_padding():
    """The control: the authors' SwarmFormer averages over PAD, so there trimming is not a no-op (and is not used)."""
    torch.manual_seed(0)
    model = build_model("swarmformer_small", _Shapes("lra_text", 259, 2, 512), {"d_model": 32}).eval()
    ids, lengths, labels = ragged(n=3, L=512, seed=1)
    lengths[0], ids[0, 100:] = 100, 0
    idx = torch.tensor([0])
    a = TokenizedTextDataset(ids, lengths, labels, sep_id=None).get_batch(idx)
    b = LengthGroupedTextDataset(ids, lengths, labels, trim_multiple=128).get_batch(idx)
    with torch.no_grad():
        assert not torch.allclose(
            model(b["input_ids"], b["attention_mask"]), model(a["input_ids"], a["attention_mask"]), rtol=1e-4, atol=1e-5
        )


# ---------------------------------------------------------------------------------- models at 4096 tokens


@pytest.mark.parametrize("profile", ["cpu", "paper"])
@pytest.mark.parametrize("key", ["lra_text", "listops", "arxiv11"])
def test_every_model_of_the_track_builds_at_its_length_with_matching_width_and_depth(profile, key):
    params = load_params(profile=profile)
    seq_len = params["tasks"][key]["options"]["max_len"]
    shapes = {"lra_text": (259, 2), "listops": (18, 10), "arxiv11": (259, 11)}[key]
    width = params["tasks"][key]["model_overrides"]["d_model"]
    for name in model_names(params, key):
        model = build_model(name, _Shapes(key, *shapes, seq_len), model_overrides(params, key, name))
        cfg = model.cfg
        assert cfg.d_model == width and cfg.seq_len == seq_len, name
        blocks = sum(cfg.depths) if hasattr(cfg, "depths") else cfg.num_layers
        assert blocks == {"cpu": 5, "paper": 12}[profile], (name, blocks)
        heads = cfg.heads[0] if hasattr(cfg, "depths") else getattr(cfg, "num_heads", getattr(cfg, "heads", None))
        if heads is not None:
            assert width // heads == 32, (name, heads)  # heads 32 wide where all L tokens are processed
        if hasattr(cfg, "window_one_sided"):
            assert 2 * cfg.window_one_sided + 1 == 129, name  # against HSW's 128-token windows
        if hasattr(cfg, "cluster_size"):
            assert seq_len % cfg.cluster_size == 0 and 128 % cfg.cluster_size == 0, name
        if getattr(cfg, "attn_dropout", 0.0) not in (0.0, None):
            pytest.fail(f"{name}: attention-probability dropout forces SDPA's quadratic-memory math path")


@pytest.mark.parametrize("name", cpu_models()[1])
def test_every_cpu_model_runs_a_4096_byte_batch(name):
    params, _ = cpu_models()
    torch.manual_seed(0)
    model = build_model(name, _Shapes("lra_text", 259, 2, 4096), model_overrides(params, "lra_text", name)).eval()
    ids = torch.randint(3, 259, (1, 4096))
    mask = torch.ones(1, 4096, dtype=torch.bool)
    mask[0, 3000:] = False
    with torch.no_grad():
        out = model(ids, mask)
    assert out.shape == (1, 2) and torch.isfinite(out).all()


# -------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
@pytest.mark.parametrize("key", LONG_TASKS)
def test_data_train_evaluate_end_to_end(tmp_path, key):
    from pipelines.data import build
    from pipelines.evaluate import evaluate
    from pipelines.train import train

    write_prepared(tmp_path / "data" / "prepared")
    params = long_params(
        tmp_path,
        lra_text={"max_len": 256, "max_train": 16, "max_val": 8, "max_test": 10},
        listops={
            "train_rows": 16,
            "val_rows": 8,
            "test_rows": 10,
            "max_depth": 4,
            "min_length": 10,
            "max_length": 120,
            "max_len": 128,
        },
    )
    params["tasks"][key]["train"].update(max_epochs=1, max_steps=2, batch_size=8)
    build(params, key, report_root=tmp_path / "reports")
    trained = train(params, key, out_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)
    names = [f"{m}-seed0" for m in model_names(params, key)]
    assert list(trained) == names and all(trained[n]["steps"] == 2 for n in names)
    results = evaluate(params, key, train_root=tmp_path / "outputs", report_root=tmp_path / "reports", tracking=False)
    classes = 2 if key == "lra_text" else 10
    for name in names:
        r = results[name]
        assert r["test_rows"] == 10 and sum(map(sum, r["confusion_matrix"])) == 10
        assert {"test_accuracy", "test_macro_f1", "test_micro_f1"} <= set(r) and len(r["per_class_f1"]) == classes
        assert r["test_micro_f1"] == pytest.approx(r["test_accuracy"])
        assert ("test_f1" in r) == (key == "lra_text")
        assert (tmp_path / "reports" / "evaluate" / key / "plots" / f"confusion_{name}.png").is_file()
    assert json.loads((tmp_path / "reports" / "evaluate" / key / "metrics.json").read_text()).keys() == set(names)


@pytest.mark.slow
def test_data_stage_errors_are_one_line_from_the_command_line(tmp_path):
    from tests.pipelines.test_cli_errors import assert_one_line_error, base_params, run_stage

    params = base_params()
    assert_one_line_error(
        run_stage("data", tmp_path, params, "--task", "arxiv11"),
        "tasks.arxiv11.options.source is empty",
        "set it to your copy",
    )
    assert_one_line_error(
        run_stage("data", tmp_path, params, "--task", "lra_text"),
        f"no train-*.parquet in {tmp_path / 'data' / 'prepared'}",
        "run the prepare stage first",
    )
    source = write_arxiv_folders(tmp_path / "arxiv")
    (source / "cs.ai" / "0.txt").write_bytes(b"\xff\xfe not utf-8")
    params["profiles"]["t"]["tasks"]["arxiv11"] = {"options": {"source": str(source)}}
    assert_one_line_error(run_stage("data", tmp_path, params, "--task", "arxiv11"), "0.txt: not UTF-8 at byte 0")
    assert not (tmp_path / "data" / "arxiv11").exists() and not list((tmp_path / "data").glob(".*tmp*"))
