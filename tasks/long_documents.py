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
padding, so the logits are those of the full-width batch (tests/tasks/test_long_tasks.py checks it per model). Training
batches group rows of similar length; validation and test splits are ordered by length (shortest first). This
only saves work: an IMDB review of ~1,300 bytes costs ~1,300 positions rather than 4,096. (A model that attends to
padding, like the authors' SwarmFormer, would see different inputs: set trim_batches: false for it.)

Scores (``tasks.metrics.MulticlassConfusion``, test split once in the evaluate stage): accuracy, macro-F1,
micro-F1 (and for ``lra_text`` the precision / recall / F1 of "positive"), with the per-class F1 and the
confusion matrix in the extras.
"""

from __future__ import annotations

import dataclasses
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
from swarmlab.heartbeat import Heartbeat
from swarmlab.integrity import FILES_KEY, check_options, read_meta, record_files
from swarmlab.io import read_parquet_checked, write_shards
from swarmlab.settings import setting
from tasks.long_data import (
    ARXIV11_CATEGORIES,
    BYTE_VOCAB_SIZE,
    LISTOPS_NUM_CLASSES,
    LISTOPS_VOCAB,
    PAD,
    check_listops_feasible,
    encode_bytes,
    generate_listops,
    listops_depth,
    load_arxiv11,
    stratified_split,
    tokenize_listops,
)
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


MAX_LEN = 65_536  # the longest id row any option may ask for (HSW's longest input in the benchmarks: 100k, no data)
MAX_ROWS = 10_000_000  # per split
# options that change how a folder is read, not what it holds: not compared with meta.json's record
LOAD_ONLY = ("data_dir", "trim_batches", "trim_multiple", "shards")


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


def write_split(
    folder: Path,
    split: str,
    ids: np.ndarray,
    lengths: np.ndarray,
    labels: np.ndarray,
    uids: list[str],
    *,
    shards: int,
    num_classes: int,
) -> dict:
    """Write one split: the real ids of each row as a list column (padding is not stored); returns its summary."""
    keep = np.arange(ids.shape[1])[None, :] < lengths[:, None]  # (N, max_len) True = real id
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    input_ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids[keep].astype(np.uint16)))
    table = pa.table(
        {
            "uid": pa.array(uids, pa.string()),
            "input_ids": input_ids,
            "length": pa.array(lengths.astype(np.int32)),
            "label": pa.array(labels.astype(np.int16)),
        }
    )
    names = write_shards(table, folder, split, shards)
    return {
        "rows": int(len(labels)),
        "shards": names,
        "mean_length": round(float(lengths.mean()), 1) if len(lengths) else 0.0,
        "max_length": int(lengths.max()) if len(lengths) else 0,
        "label_counts": np.bincount(labels, minlength=num_classes).tolist(),
    }


def read_split(
    folder: Path, split: str, max_len: int, *, num_classes: int | None = None, vocab_size: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids (N, max_len) int16 PAD-padded, lengths (N,) int64, labels (N,) int64)`` of ``split``'s shards.

    Each shard is checked as it is read (one line naming it): no row longer than ``max_len``, a ``length`` column
    that matches the ids, no label outside ``0..num_classes-1``, no id outside the vocabulary or a real PAD."""
    shards = sorted(Path(folder).glob(f"{split}-*.parquet"))
    if not shards:
        raise SwarmlabError(
            f"no {split}-*.parquet shards in {folder}: rebuild the data (python -m pipelines.data --task ...)"
        )
    ids, lengths, labels = [], [], []
    for shard in shards:
        t = read_parquet_checked(shard, ["input_ids", "length", "label"])
        col = t.column("input_ids").combine_chunks()
        n = col.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
        if len(n) and n.max() > max_len:
            raise SwarmlabError(f"{shard}: a row has {n.max()} ids > max_len={max_len} of meta.json: rebuild the data")
        stated = t.column("length").to_numpy(zero_copy_only=False).astype(np.int64)
        if (stated != n).any():
            row = int(np.flatnonzero(stated != n)[0])
            raise SwarmlabError(
                f"{shard} row {row}: length {stated[row]} but {n[row]} ids: the shard is damaged; rebuild the data"
            )
        label = t.column("label").to_numpy(zero_copy_only=False).astype(np.int64)
        if num_classes is not None and len(label) and (label.min() < 0 or label.max() >= num_classes):
            row = int(np.flatnonzero((label < 0) | (label >= num_classes))[0])
            raise SwarmlabError(f"{shard} row {row}: label {label[row]} outside 0..{num_classes - 1}: rebuild the data")
        flat = col.flatten().to_numpy(zero_copy_only=False)
        if vocab_size is not None and len(flat) and (flat.max() >= vocab_size or flat.min() == PAD):
            bad = int(flat.max()) if flat.max() >= vocab_size else PAD
            raise SwarmlabError(
                f"{shard}: id {bad} is outside the vocabulary of {vocab_size} (or padding stored as a real "
                f"token): rebuild the data"
            )
        block = np.full((len(n), max_len), PAD, dtype=np.int16)
        block[np.arange(max_len)[None, :] < n[:, None]] = flat  # row-major
        ids.append(block)
        lengths.append(n)
        labels.append(label)
    return np.concatenate(ids), np.concatenate(lengths), np.concatenate(labels)


class LongDocumentTask(TextClassificationTask):
    """A classification task over the id sequences of a folder this task builds (see the module docstring).

    Subclasses set ``name``, ``num_classes``, ``class_names``, ``vocab_size``, ``Options`` and implement
    ``make_splits(datasets, seed) -> {split: EncodedSplit}`` and ``source_info()``.
    """

    vocab_size: ClassVar[int] = BYTE_VOCAB_SIZE
    positive_class: ClassVar[int | None] = None  # binary tasks: the class whose precision / recall / F1 to report
    split_files = "{split}-*.parquet"

    # data folder ---------------------------------------------------------------------------------------
    @property
    def rebuild_hint(self) -> str:
        return f"python -m pipelines.data --task {self.key} (dvc repro derive@{self.key})"

    def _generation_options(self) -> dict:
        """The options the folder's content depends on (``LOAD_ONLY`` ones change how it is read, not what it holds)."""
        return {k: v for k, v in dataclasses.asdict(self.options).items() if k not in LOAD_ONLY}

    @functools.cached_property
    def meta(self) -> dict:
        """``meta.json``, checked: JSON, built with the options in force, stating the facts the loaders use."""
        path = self.data_dir / "meta.json"
        meta = read_meta(path, self.rebuild_hint)
        check_options(meta, path, self._generation_options(), f"tasks.{self.key}.options", self.rebuild_hint)
        for key, want in (
            ("seq_len", self.options.max_len),
            ("vocab_size", self.vocab_size),
            ("num_classes", self.num_classes),
        ):
            if meta.get(key) != want:
                raise SwarmlabError(
                    f"{path}: {key} {meta.get(key)!r}, but tasks.{self.key} needs {want!r}: the folder "
                    f"belongs to another task or version; rebuild it: {self.rebuild_hint}"
                )
        return meta

    def model_kwargs(self) -> dict:
        """Vocabulary and classes, and seq_len = the data's max_len (``model_overrides`` may set a shorter one)."""
        return {"vocab_size": self.meta["vocab_size"], "num_classes": self.num_classes, "seq_len": self.meta["seq_len"]}

    def max_seq_len(self) -> int:
        return self.meta["seq_len"]

    def load_split(self, split: str, seq_len: int | None = None, *, model_cfg=None) -> TokenizedTextDataset:
        """``split`` as tensors, cut to ``seq_len``; batches trimmed to their longest row unless trim_batches is off."""
        data_len = self.meta["seq_len"]
        if seq_len and seq_len > data_len:
            raise SwarmlabError(
                f"the model has seq_len={seq_len} but tasks.{self.key} data is {data_len} wide: raise "
                f"tasks.{self.key}.options.max_len to {seq_len} and rebuild the data "
                f"(dvc repro data@{self.key}), or lower the model's seq_len"
            )
        self.check_data((split,))
        ids, lengths, labels = read_split(
            self.data_dir, split, data_len, num_classes=self.num_classes, vocab_size=self.meta["vocab_size"]
        )
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
        return {
            "train_rows": len(train),
            "val_rows": len(val),
            "seq_len": train.seq_len,
            "train_mean_length": round(mean, 1),
            "trim_batches": self.options.trim_batches,
        }

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
        summary = {
            "task": self.name,
            "seed": seed,
            "seq_len": o.max_len,
            "vocab_size": self.vocab_size,
            "num_classes": self.num_classes,
            "pad_id": PAD,
            **self.source_info(),
            "options": self._generation_options(),
            "splits": {},
        }
        present = np.unique(splits["train"].labels)
        if len(present) < 2:  # a classifier of one class learns nothing, and every score of it is vacuous
            only = self.class_names[int(present[0])] if len(present) else "none"
            raise SwarmlabError(
                f"tasks.{self.key}: every training document is of one class ({only}): a classifier needs "
                f"at least 2; check the source ({self.source_info().get('source', 'the generator')})"
            )
        files = {}
        for split in SPLITS:
            part = splits[split]
            if not len(part.labels):
                raise SwarmlabError(
                    f"tasks.{self.key}: the {split} split is empty: check the source and the row options"
                )
            if (part.lengths == 0).any():
                first = part.uids[int(np.flatnonzero(part.lengths == 0)[0])]
                raise SwarmlabError(
                    f"tasks.{self.key}: {int((part.lengths == 0).sum())} empty document(s) in {split} "
                    f"(e.g. {first}): remove them from the source"
                )
            entry = write_split(
                out_dir,
                split,
                part.ids,
                part.lengths,
                part.labels,
                part.uids,
                shards=o.shards,
                num_classes=self.num_classes,
            )
            summary["splits"][split] = {**entry, **part.facts}
            files[split] = entry["shards"]
        summary[FILES_KEY] = record_files(out_dir, files)
        (out_dir / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
        flat = {"seq_len": o.max_len}
        for split in SPLITS:  # the stage's DVC metrics: scalars only
            flat.update({f"{split}_{k}": v for k, v in summary["splits"][split].items() if isinstance(v, (int, float))})
        return flat

    def encode_texts(self, texts: list, labels: np.ndarray, uids: list[str]) -> EncodedSplit:
        """Byte-level ids of ``texts`` cut at ``max_len``; ``facts`` counts the documents that were cut."""
        ids, lengths = encode_bytes(texts, self.options.max_len)
        raw = np.fromiter((len(t.encode("utf-8") if isinstance(t, str) else t) for t in texts), np.int64, len(texts))
        return EncodedSplit(
            ids,
            lengths,
            labels.astype(np.int64),
            uids,
            {
                "cut_at_max_len": int((raw > self.options.max_len).sum()),
                "mean_bytes_before_cut": round(float(raw.mean()), 1) if len(raw) else 0.0,
            },
        )


# ---------------------------------------------------------------------------------------------------- lra_text


@dataclass
class LraTextOptions:
    data_dir: str = "data/lra_text"  # this task's folder (the derive@lra_text stage writes it)
    source_dir: str = "data/prepared"  # the prepare stage's IMDB splits: {train,val,test}-*.parquet, uid/text/label
    max_len: int = setting(
        4096, ge=1, le=MAX_LEN
    )  # bytes per review kept (LRA: 4000; 4096 = a multiple of HSW's windows)
    max_train: int = setting(0, ge=0, le=MAX_ROWS)  # rows kept per split (seeded, stratified); 0 = all
    max_val: int = setting(0, ge=0, le=MAX_ROWS)
    max_test: int = setting(0, ge=0, le=MAX_ROWS)
    trim_batches: bool = True  # cut each batch after its longest review (padding-aware models: same logits)
    trim_multiple: int = setting(128, ge=1, le=MAX_LEN)  # batch widths are multiples of this (HSW's window)
    shards: int = setting(2, ge=1, le=1000)  # parquet shards per split

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

    def data_inputs(self) -> list[str]:
        return [self.options.source_dir]

    def make_splits(self, datasets: Path, seed: int):
        o = self.options
        folder = self.path(o.source_dir)
        caps = {"train": o.max_train, "val": o.max_val, "test": o.max_test}
        out = {}
        for k, split in enumerate(SPLITS):
            shards = sorted(folder.glob(f"{split}-*.parquet"))
            if not shards:
                raise SwarmlabError(
                    f"no {split}-*.parquet in {folder}: run the prepare stage first (dvc repro prepare) "
                    f"or point tasks.{self.key}.options.source_dir at its output"
                )
            tables = [read_parquet_checked(s, ["uid", "text", "label"]) for s in shards]
            table = pa.concat_tables(tables)
            labels = table.column("label").to_numpy().astype(np.int64)
            bad = sorted(set(np.unique(labels).tolist()) - {0, 1})
            if bad:
                raise SwarmlabError(
                    f"{folder}: {split} has label(s) {bad}; IMDB labels are 0 (negative) and 1 (positive)"
                )
            keep = cap_rows(labels, caps[split], seed + k)
            texts = table.column("text").take(pa.array(keep)).to_pylist()
            uids = table.column("uid").take(pa.array(keep)).to_pylist()
            out[split] = self.encode_texts(texts, labels[keep], uids)
        return out


# ----------------------------------------------------------------------------------------------------- listops


@dataclass
class ListOpsOptions:
    data_dir: str = "data/listops"
    train_rows: int = setting(96_000, ge=1, le=MAX_ROWS)  # LRA's sizes: 96k / 2k / 2k
    val_rows: int = setting(2_000, ge=1, le=MAX_ROWS)
    test_rows: int = setting(2_000, ge=1, le=MAX_ROWS)
    max_depth: int = setting(10, ge=1, le=50)  # LRA: tree depth <= 10 (the root is depth 1)
    max_args: int = setting(10, ge=2, le=100)  # LRA: 2..10 arguments per operator
    min_length: int = setting(500, ge=0, le=MAX_LEN)  # LRA keeps min_length < tokens < max_length
    max_length: int = setting(2000, ge=2, le=MAX_LEN + 1)
    max_len: int = setting(2048, ge=1, le=MAX_LEN)  # id columns (>= max_length - 1, the longest expression)
    trim_batches: bool = True
    trim_multiple: int = setting(128, ge=1, le=MAX_LEN)
    shards: int = setting(2, ge=1, le=1000)

    def __post_init__(self):
        _check_common(self)
        for name in ("train_rows", "val_rows", "test_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_depth < 1 or self.max_args < 2:
            raise ValueError(f"max_depth must be >= 1 and max_args >= 2, got {self.max_depth} and {self.max_args}")
        if not 0 <= self.min_length < self.max_length - 1:
            raise ValueError(
                f"need 0 <= min_length < max_length - 1 (tokens lie strictly between), got "
                f"{self.min_length} and {self.max_length}"
            )
        if self.max_len < self.max_length - 1:
            raise ValueError(
                f"max_len={self.max_len} cannot hold the longest expression ({self.max_length - 1} tokens): "
                f"raise max_len to >= {self.max_length - 1}"
            )


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
        return {
            "generator": {
                "max_depth": o.max_depth,
                "max_args": o.max_args,
                "min_length": o.min_length,
                "max_length": o.max_length,
                "unique": True,
            },
            "vocab": list(LISTOPS_VOCAB),
        }

    def split_items(self, split: str, folder: Path | None = None) -> dict[Path, list[bytes]]:
        """Each row's expression, by content (its ids): generated, so its ``uid`` (``train/17``) names no item."""
        out = {}
        for shard in sorted(Path(folder or self.data_dir).glob(f"{split}-*.parquet")):
            column = read_parquet_checked(shard, ["input_ids"]).column("input_ids").combine_chunks()
            offsets, values = column.offsets.to_numpy(), column.values.to_numpy()
            out[shard] = [values[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])]
        return out

    def make_splits(self, datasets: Path, seed: int):
        o = self.options
        sizes = {"train": o.train_rows, "val": o.val_rows, "test": o.test_rows}
        total = sum(sizes.values())
        check_listops_feasible(
            total, max_depth=o.max_depth, max_args=o.max_args, min_length=o.min_length, max_length=o.max_length
        )  # refused before drawing when it cannot finish
        beat = Heartbeat(f"data {self.key}", total, "expressions")
        # one draw for all splits: `unique` then keeps every expression in one split only
        texts, labels = generate_listops(
            total,
            seed=seed,
            max_depth=o.max_depth,
            max_args=o.max_args,
            min_length=o.min_length,
            max_length=o.max_length,
            progress=lambda kept, tries: beat.beat(kept, f"{tries:,} tries"),
        )
        out, start = {}, 0
        for split in SPLITS:
            part = slice(start, start + sizes[split])
            ids, lengths = tokenize_listops(texts[part], o.max_len)
            depths = [listops_depth(t) for t in texts[part]]
            out[split] = EncodedSplit(
                ids,
                lengths,
                labels[part],
                [f"{split}/{i}" for i in range(sizes[split])],
                {"max_depth": max(depths), "mean_depth": round(float(np.mean(depths)), 2)},
            )
            start += sizes[split]
        return out


# ----------------------------------------------------------------------------------------------------- arxiv11


@dataclass
class Arxiv11Options:
    data_dir: str = "data/arxiv11"
    source: str = ""  # your copy: a folder of <category>/*.txt (He et al. 2019) or {train,val,test}.jsonl
    max_len: int = setting(
        4096, ge=1, le=MAX_LEN
    )  # bytes per document kept (the authors: 4096 BPE tokens, ~4x more text)
    val_fraction: float = 0.1  # folder layout (no splits): stratified, seeded; JSONL without val.jsonl: from train
    test_fraction: float = 0.1  # folder layout only
    encoding_errors: str = "strict"  # .txt not in UTF-8: strict = an error naming the file; replace = U+FFFD
    max_train: int = setting(0, ge=0, le=MAX_ROWS)  # rows kept per split (seeded, stratified); 0 = all
    max_val: int = setting(0, ge=0, le=MAX_ROWS)
    max_test: int = setting(0, ge=0, le=MAX_ROWS)
    trim_batches: bool = True
    trim_multiple: int = setting(128, ge=1, le=MAX_LEN)
    shards: int = setting(2, ge=1, le=1000)

    def __post_init__(self):
        _check_common(self)
        if not (0 < self.val_fraction and 0 <= self.test_fraction and self.val_fraction + self.test_fraction < 1):
            raise ValueError(
                f"need val_fraction > 0, test_fraction >= 0 and a sum < 1, got {self.val_fraction} and "
                f"{self.test_fraction}"
            )
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
            raise SwarmlabError(
                f"tasks.{self.key}.options.source is empty: arXiv-11 cannot be downloaded here; set it "
                f"to your copy (a folder of <category>/*.txt, or train/test[/val].jsonl; see docs/tracks.md)"
            )
        splits = load_arxiv11(
            self.path(o.source),
            val_fraction=o.val_fraction,
            test_fraction=o.test_fraction,
            seed=seed,
            encoding_errors=o.encoding_errors,
        )
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
            out[split] = self.encode_texts(
                [part.texts[i] for i in keep], part.labels[keep], [f"{split}/{i}" for i in keep]
            )
        return out
