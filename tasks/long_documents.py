"""Long-document classification: byte-level IMDB (LRA "Text"), LRA ListOps and arXiv-11, on the task contract.

Each task builds its own data folder through ``build_data`` (the generic stage ``python -m pipelines.data
--task <key>``, ``data@<key>`` in dvc.yaml) and trains every text model, ``model(input_ids (B, L),
attention_mask (B, L)) -> logits``, on it:

* ``lra_text``: the UTF-8 bytes of each IMDB review (ids ``byte + 3``, ``tasks/long_data.py``), at most
  ``max_len`` (default 4096; LRA uses 4000), from the prepare stage's ``data/prepared`` splits;
* ``listops``: LRA ListOps expressions generated with the run's seed (``generate_listops``), 10 classes;
* ``arxiv11``: He et al. (2019)'s 11 arXiv categories from a copy the user brings (``source``: their folder
  layout or JSONL splits, ``load_arxiv11``), as bytes like ``lra_text``.

The folder: ``meta.json`` and ``{train,val,test}-NNN.parquet`` shards with one row per document: ``uid``,
``input_ids`` (the real ids only, a variable-length list of uint16), ``length`` and ``label``. Loading pads
the ids into an (N, max_len) int16 matrix with PAD = 0.

Batches are trimmed to their longest real row (rounded up to ``trim_multiple``; ``trim_batches: false`` keeps
every batch max_len wide): the columns dropped are padding in every row, and every model of the track masks
padding, so the logits are those of the full-width batch (tests/test_long_tasks.py checks it per model). Training
batches group rows of similar length; validation and test splits are ordered by length (shortest first). This
only saves work: an IMDB review of ~1,300 bytes costs ~1,300 positions rather than 4,096. (A model that attends to
padding, like the authors' SwarmFormer, would see different inputs: set trim_batches: false for it.)

Scores (``tasks.metrics.MulticlassConfusion``, test split once in the evaluate stage): accuracy, macro-F1,
micro-F1 (and for ``lra_text`` the precision / recall / F1 of "positive"), with the per-class F1 and the
confusion matrix in the extras.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import torch

from swarmlab.errors import SwarmlabError
from swarmlab.io import read_parquet_checked, write_shards
from tasks.long_data import (ARXIV11_CATEGORIES, BYTE_VOCAB_SIZE, LISTOPS_NUM_CLASSES, LISTOPS_VOCAB, PAD, encode_bytes,
                             generate_listops, listops_depth, load_arxiv11, stratified_split, tokenize_listops)
from tasks.metrics import MulticlassConfusion
from tasks.registry import register_task
from tasks.text_classification import TextClassificationTask
from tasks.text_data import LengthGroupedTextDataset, TokenizedTextDataset

SPLITS = ("train", "val", "test")


@dataclass
class EncodedSplit:
    """One split as ids: ``ids`` (N, max_len) PAD-padded, ``lengths`` (N,), ``labels`` (N,), ``uids`` (N,)."""

    ids: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray
    uids: list[str]
    facts: dict = field(default_factory=dict)  # added to the split's entry in meta.json (rows cut at max_len...)


def _check_common(o) -> None:
    """Checks shared by the options of every long-document task (the message says what to change)."""
    if o.max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {o.max_len}")
    if o.trim_multiple < 1:
        raise ValueError(f"trim_multiple must be >= 1, got {o.trim_multiple}")
    if o.shards < 1:
        raise ValueError(f"shards must be >= 1, got {o.shards}")


def cap_rows(labels: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded, stratified subset of ``count`` rows (all rows when ``count`` is 0 or >= the rows).

    Each class keeps its share, rounded; the rounding remainder goes to the largest classes first."""
    n = len(labels)
    if not count or count >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    quota = np.floor(counts * count / n).astype(int)
    for k in np.argsort(-counts, kind="stable")[: count - quota.sum()]:
        quota[k] += 1
    picked = [rng.permutation(np.flatnonzero(labels == c))[:q] for c, q in zip(classes, quota)]
    return np.sort(np.concatenate(picked))


def write_split(folder: Path, split: str, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray,
                uids: list[str], *, shards: int, num_classes: int) -> dict:
    """Write one split: the real ids of each row as a list column (padding is not stored); returns its summary."""
    keep = np.arange(ids.shape[1])[None, :] < lengths[:, None]  # (N, max_len) True = real id
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    input_ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids[keep].astype(np.uint16)))
    table = pa.table({"uid": pa.array(uids, pa.string()), "input_ids": input_ids,
                      "length": pa.array(lengths.astype(np.int32)), "label": pa.array(labels.astype(np.int16))})
    names = write_shards(table, folder, split, shards)
    return {"rows": int(len(labels)), "shards": names, "mean_length": round(float(lengths.mean()), 1) if len(lengths) else 0.0,
            "max_length": int(lengths.max()) if len(lengths) else 0,
            "label_counts": np.bincount(labels, minlength=num_classes).tolist()}


def read_split(folder: Path, split: str, max_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids (N, max_len) int16 PAD-padded, lengths (N,) int64, labels (N,) int64)`` of ``split``'s shards."""
    shards = sorted(Path(folder).glob(f"{split}-*.parquet"))
    if not shards:
        raise SwarmlabError(f"no {split}-*.parquet shards in {folder}: rebuild the data (python -m pipelines.data --task ...)")
    ids, lengths, labels = [], [], []
    for shard in shards:
        t = read_parquet_checked(shard, ["input_ids", "length", "label"])
        col = t.column("input_ids").combine_chunks()
        n = col.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
        if len(n) and n.max() > max_len:
            raise SwarmlabError(f"{shard}: a row has {n.max()} ids > max_len={max_len} of meta.json: rebuild the data")
        block = np.full((len(n), max_len), PAD, dtype=np.int16)
        block[np.arange(max_len)[None, :] < n[:, None]] = col.flatten().to_numpy(zero_copy_only=False)  # row-major
        ids.append(block)
        lengths.append(n)
        labels.append(t.column("label").to_numpy().astype(np.int64))
    return np.concatenate(ids), np.concatenate(lengths), np.concatenate(labels)


class LongDocumentTask(TextClassificationTask):
    """A classification task over the id sequences of a folder this task builds (see the module docstring).

    Subclasses set ``name``, ``num_classes``, ``class_names``, ``vocab_size``, ``Options`` and implement
    ``make_splits(datasets, seed) -> {split: EncodedSplit}`` and ``source_info()``.
    """

    vocab_size: ClassVar[int] = BYTE_VOCAB_SIZE
    positive_class: ClassVar[int | None] = None  # binary tasks: the class whose precision / recall / F1 to report

    # data folder ---------------------------------------------------------------------------------------
    @functools.cached_property
    def meta(self) -> dict:
        path = self.data_dir / "meta.json"
        if not path.is_file():
            raise SwarmlabError(f"{path} is missing: build the data first (python -m pipelines.data --task {self.key}, "
                                f"or dvc repro data@{self.key})")
        return json.loads(path.read_text())

    def model_kwargs(self) -> dict:
        """Vocabulary and classes, and seq_len = the data's max_len (``model_overrides`` may set a shorter one)."""
        return {"vocab_size": self.meta["vocab_size"], "num_classes": self.num_classes, "seq_len": self.meta["seq_len"]}

    def max_seq_len(self) -> int:
        return self.meta["seq_len"]

    def load_split(self, split: str, seq_len: int | None = None, *, model_cfg=None) -> TokenizedTextDataset:
        """``split`` as tensors, cut to ``seq_len``; batches trimmed to their longest row unless trim_batches is off."""
        data_len = self.meta["seq_len"]
        if seq_len and seq_len > data_len:
            raise SwarmlabError(f"the model has seq_len={seq_len} but tasks.{self.key} data is {data_len} wide: raise "
                                f"tasks.{self.key}.options.max_len to {seq_len} and rebuild the data "
                                f"(dvc repro data@{self.key}), or lower the model's seq_len")
        ids, lengths, labels = read_split(self.data_dir, split, data_len)
        args = torch.from_numpy(ids), torch.from_numpy(lengths), torch.from_numpy(labels)
        if not self.options.trim_batches:
            ds = TokenizedTextDataset(*args, sep_id=None)
        else:
            # a model that states a cluster size gets widths divisible by it (SwarmFormer needs L % S == 0)
            multiple = math.lcm(self.options.trim_multiple, getattr(model_cfg, "cluster_size", 1) or 1)
            ds = LengthGroupedTextDataset(*args, sep_id=None, trim_multiple=multiple)
            if split != "train":  # consecutive evaluation batches have similar lengths; the shortest first, so
                ds = ds.sorted_by_length(descending=False)  # that the evaluate stage's warm-up batch is the cheapest
        return ds.truncated(seq_len) if seq_len else ds

    def train_data(self, model_cfg) -> TokenizedTextDataset:
        return self.load_split("train", getattr(model_cfg, "seq_len", None), model_cfg=model_cfg)

    def eval_data(self, split: str, model_cfg) -> TokenizedTextDataset:
        return self.load_split(split, getattr(model_cfg, "seq_len", None), model_cfg=model_cfg)

    def describe_data(self, train, val) -> dict:
        mean = float(train.lengths.double().mean()) if len(train) else 0.0
        return {"train_rows": len(train), "val_rows": len(val), "seq_len": train.seq_len,
                "train_mean_length": round(mean, 1), "trim_batches": self.options.trim_batches}

    # scores -----------------------------------------------------------------------------------------------
    def new_metrics(self) -> MulticlassConfusion:
        return MulticlassConfusion(self.num_classes, class_names=self.class_names, positive=self.positive_class)

    # building the folder ----------------------------------------------------------------------------------
    def make_splits(self, datasets: Path, seed: int) -> dict[str, EncodedSplit]:
        """The train, val and test splits as ids (``datasets``: the shared datasets folder; ``seed``: the run's)."""
        raise NotImplementedError

    def source_info(self) -> dict:
        return {}

    def build_data(self, out_dir: Path, *, datasets: Path, seed: int) -> dict:
        o = self.options
        splits = self.make_splits(datasets, seed)
        summary = {"task": self.name, "seed": seed, "seq_len": o.max_len, "vocab_size": self.vocab_size,
                   "num_classes": self.num_classes, "pad_id": PAD, **self.source_info(), "splits": {}}
        for split in SPLITS:
            part = splits[split]
            if not len(part.labels):
                raise SwarmlabError(f"tasks.{self.key}: the {split} split is empty: check the source and the row options")
            if (part.lengths == 0).any():
                first = part.uids[int(np.flatnonzero(part.lengths == 0)[0])]
                raise SwarmlabError(f"tasks.{self.key}: {int((part.lengths == 0).sum())} empty document(s) in {split} "
                                    f"(e.g. {first}): remove them from the source")
            entry = write_split(out_dir, split, part.ids, part.lengths, part.labels, part.uids, shards=o.shards,
                                num_classes=self.num_classes)
            summary["splits"][split] = {**entry, **part.facts}
        (out_dir / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
        flat = {"seq_len": o.max_len}
        for split in SPLITS:  # the stage's DVC metrics: scalars only
            flat.update({f"{split}_{k}": v for k, v in summary["splits"][split].items() if isinstance(v, (int, float))})
        return flat

    def encode_texts(self, texts: list, labels: np.ndarray, uids: list[str]) -> EncodedSplit:
        """Byte-level ids of ``texts`` cut at ``max_len``; ``facts`` counts the documents that were cut."""
        ids, lengths = encode_bytes(texts, self.options.max_len)
        raw = np.fromiter((len(t.encode("utf-8") if isinstance(t, str) else t) for t in texts), np.int64, len(texts))
        return EncodedSplit(ids, lengths, labels.astype(np.int64), uids,
                            {"cut_at_max_len": int((raw > self.options.max_len).sum()),
                             "mean_bytes_before_cut": round(float(raw.mean()), 1) if len(raw) else 0.0})


# ---------------------------------------------------------------------------------------------------- lra_text


@dataclass
class LraTextOptions:
    data_dir: str = "data/lra_text"  # this task's folder (the derive@lra_text stage writes it)
    source_dir: str = "data/prepared"  # the prepare stage's IMDB splits: {train,val,test}-*.parquet, uid/text/label
    max_len: int = 4096  # bytes per review kept (LRA: 4000; 4096 = a multiple of HSW's windows and merges)
    max_train: int = 0  # rows kept per split (seeded, stratified); 0 = all
    max_val: int = 0
    max_test: int = 0
    trim_batches: bool = True  # cut each batch after its longest review (padding-aware models: same logits)
    trim_multiple: int = 128  # batch widths are multiples of this (HSW's window)
    shards: int = 2  # parquet shards per split

    def __post_init__(self):
        _check_common(self)
        for name in ("max_train", "max_val", "max_test"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = all rows), got {getattr(self, name)}")


@register_task
class LraTextTask(LongDocumentTask):
    """Byte-level IMDB sentiment, the Long Range Arena "Text" task (Tay et al., 2021): 2 classes."""

    name = "lra_text"
    item_name = "reviews"
    Options = LraTextOptions
    num_classes = 2
    positive_class = 1
    class_names = ("negative", "positive")

    def source_info(self) -> dict:
        return {"source": str(self.path(self.options.source_dir)), "encoding": "utf-8 bytes + 3 (tasks/long_data.py)"}

    def make_splits(self, datasets: Path, seed: int):
        o = self.options
        folder = self.path(o.source_dir)
        caps = {"train": o.max_train, "val": o.max_val, "test": o.max_test}
        out = {}
        for k, split in enumerate(SPLITS):
            shards = sorted(folder.glob(f"{split}-*.parquet"))
            if not shards:
                raise SwarmlabError(f"no {split}-*.parquet in {folder}: run the prepare stage first (dvc repro prepare) "
                                    f"or point tasks.{self.key}.options.source_dir at its output")
            tables = [read_parquet_checked(s, ["uid", "text", "label"]) for s in shards]
            table = pa.concat_tables(tables)
            labels = table.column("label").to_numpy().astype(np.int64)
            bad = sorted(set(np.unique(labels).tolist()) - {0, 1})
            if bad:
                raise SwarmlabError(f"{folder}: {split} has label(s) {bad}; IMDB labels are 0 (negative) and 1 (positive)")
            keep = cap_rows(labels, caps[split], seed + k)
            texts = table.column("text").take(pa.array(keep)).to_pylist()
            uids = table.column("uid").take(pa.array(keep)).to_pylist()
            out[split] = self.encode_texts(texts, labels[keep], uids)
        return out


# ----------------------------------------------------------------------------------------------------- listops


@dataclass
class ListOpsOptions:
    data_dir: str = "data/listops"
    train_rows: int = 96_000  # LRA's sizes: 96k / 2k / 2k
    val_rows: int = 2_000
    test_rows: int = 2_000
    max_depth: int = 10  # LRA: tree depth <= 10 (the root is depth 1)
    max_args: int = 10  # LRA: 2..10 arguments per operator
    min_length: int = 500  # LRA keeps min_length < tokens < max_length
    max_length: int = 2000
    max_len: int = 2048  # id columns (>= max_length - 1, the longest expression; a multiple of HSW's windows)
    trim_batches: bool = True
    trim_multiple: int = 128
    shards: int = 2

    def __post_init__(self):
        _check_common(self)
        for name in ("train_rows", "val_rows", "test_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_depth < 1 or self.max_args < 2:
            raise ValueError(f"max_depth must be >= 1 and max_args >= 2, got {self.max_depth} and {self.max_args}")
        if not 0 <= self.min_length < self.max_length - 1:
            raise ValueError(f"need 0 <= min_length < max_length - 1 (tokens lie strictly between), got "
                             f"{self.min_length} and {self.max_length}")
        if self.max_len < self.max_length - 1:
            raise ValueError(f"max_len={self.max_len} cannot hold the longest expression ({self.max_length - 1} tokens): "
                             f"raise max_len to >= {self.max_length - 1}")


@register_task
class ListOpsTask(LongDocumentTask):
    """LRA ListOps (Nangia & Bowman, 2018; Tay et al., 2021): the value 0..9 of a nested MAX/MIN/MED/SM expression."""

    name = "listops"
    item_name = "expressions"
    Options = ListOpsOptions
    vocab_size = len(LISTOPS_VOCAB)
    num_classes = LISTOPS_NUM_CLASSES
    class_names = tuple(str(d) for d in range(LISTOPS_NUM_CLASSES))

    def source_info(self) -> dict:
        o = self.options
        return {"generator": {"max_depth": o.max_depth, "max_args": o.max_args, "min_length": o.min_length,
                              "max_length": o.max_length, "unique": True}, "vocab": list(LISTOPS_VOCAB)}

    def make_splits(self, datasets: Path, seed: int):
        o = self.options
        sizes = {"train": o.train_rows, "val": o.val_rows, "test": o.test_rows}
        # one draw for all splits: `unique` then keeps every expression in one split only
        texts, labels = generate_listops(sum(sizes.values()), seed=seed, max_depth=o.max_depth, max_args=o.max_args,
                                         min_length=o.min_length, max_length=o.max_length)
        out, start = {}, 0
        for split in SPLITS:
            part = slice(start, start + sizes[split])
            ids, lengths = tokenize_listops(texts[part], o.max_len)
            depths = [listops_depth(t) for t in texts[part]]
            out[split] = EncodedSplit(ids, lengths, labels[part], [f"{split}/{i}" for i in range(sizes[split])],
                                      {"max_depth": max(depths), "mean_depth": round(float(np.mean(depths)), 2)})
            start += sizes[split]
        return out


# ----------------------------------------------------------------------------------------------------- arxiv11


@dataclass
class Arxiv11Options:
    data_dir: str = "data/arxiv11"
    source: str = ""  # your copy: a folder of <category>/*.txt (He et al. 2019) or {train,val,test}.jsonl
    max_len: int = 4096  # bytes per document kept (the authors used 4096 Longformer BPE tokens: ~4x more text)
    val_fraction: float = 0.1  # folder layout (no splits): stratified, seeded; JSONL without val.jsonl: from train
    test_fraction: float = 0.1  # folder layout only
    encoding_errors: str = "strict"  # .txt not in UTF-8: strict = an error naming the file; replace = U+FFFD
    max_train: int = 0  # rows kept per split (seeded, stratified); 0 = all
    max_val: int = 0
    max_test: int = 0
    trim_batches: bool = True
    trim_multiple: int = 128
    shards: int = 2

    def __post_init__(self):
        _check_common(self)
        if not (0 < self.val_fraction and 0 <= self.test_fraction and self.val_fraction + self.test_fraction < 1):
            raise ValueError(f"need val_fraction > 0, test_fraction >= 0 and a sum < 1, got {self.val_fraction} and "
                             f"{self.test_fraction}")
        if self.encoding_errors not in ("strict", "replace", "ignore"):
            raise ValueError(f"encoding_errors must be strict, replace or ignore, got {self.encoding_errors!r}")
        for name in ("max_train", "max_val", "max_test"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = all rows), got {getattr(self, name)}")


@register_task
class Arxiv11Task(LongDocumentTask):
    """arXiv-11 (He et al., 2019): 11 subject categories of full papers, byte-level; bring your own copy."""

    name = "arxiv11"
    item_name = "documents"
    Options = Arxiv11Options
    num_classes = len(ARXIV11_CATEGORIES)
    class_names = ARXIV11_CATEGORIES

    def source_info(self) -> dict:
        return {"source": str(self.path(self.options.source)), "encoding": "utf-8 bytes + 3 (tasks/long_data.py)"}

    def make_splits(self, datasets: Path, seed: int):
        o = self.options
        if not o.source:
            raise SwarmlabError(f"tasks.{self.key}.options.source is empty: arXiv-11 cannot be downloaded here; set it "
                                f"to your copy (a folder of <category>/*.txt, or train/test[/val].jsonl; see docs/tracks.md)")
        splits = load_arxiv11(self.path(o.source), val_fraction=o.val_fraction, test_fraction=o.test_fraction, seed=seed,
                              encoding_errors=o.encoding_errors)
        if "val" not in splits:  # JSONL without val.jsonl: a stratified share of train
            train = splits["train"]
            parts = stratified_split(train.labels, val_fraction=o.val_fraction, test_fraction=0.0, seed=seed)
            splits["val"] = type(train)([train.texts[i] for i in parts["val"]], train.labels[parts["val"]])
            splits["train"] = type(train)([train.texts[i] for i in parts["train"]], train.labels[parts["train"]])
        caps = {"train": o.max_train, "val": o.max_val, "test": o.max_test}
        out = {}
        for k, split in enumerate(SPLITS):
            part = splits[split]
            keep = cap_rows(part.labels, caps[split], seed + k)
            out[split] = self.encode_texts([part.texts[i] for i in keep], part.labels[keep], [f"{split}/{i}" for i in keep])
        return out
