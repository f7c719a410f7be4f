"""Sequence classification over tokenized text: ``model(input_ids, attention_mask) -> logits``."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from swarmlab import plots
from swarmlab.errors import SwarmlabError
from swarmlab.io import read_parquet_checked
from tasks.base import Task
from tasks.metrics import ConfusionMatrix
from tasks.text_data import TokenizedTextDataset


def shard_uids(folder: Path, split: str) -> dict[Path, list[str]]:
    """``{shard: [review id per row]}`` for ``split``'s ``{split}-*.parquet`` shards: each row's ``uid`` up to ``#``; a
    damaged shard is one line naming it."""
    out = {}
    for shard in sorted(Path(folder).glob(f"{split}-*.parquet")):
        uids = read_parquet_checked(shard, ["uid"]).column("uid").to_pylist()
        out[shard] = [u.split("#", 1)[0] for u in uids]
    return out


@dataclass
class TextOptions:
    data_dir: str = "data/tokenized"  # the tokenize stage's output (relative to the work folder)


class TextClassificationTask(Task):
    """Cross-entropy over ``num_classes``; accuracy, precision/recall/F1 of ``positive_class``, confusion matrix.

    The data is a tokenized folder (``meta.json`` + ``{train,val,test}-*.parquet``); splits are re-truncated
    to the model's ``seq_len``.
    """

    model_kind = "text"
    monitor = "accuracy"
    mode = "max"
    item_name = "reviews"
    Options = TextOptions
    num_classes: ClassVar[int] = 2
    positive_class: ClassVar[int] = 1
    class_names: ClassVar[tuple[str, ...]] = ()

    @functools.cached_property
    def meta(self) -> dict:
        path = self.data_dir / "meta.json"
        if not path.is_file():
            raise SwarmlabError(f"{path} is missing: run the tokenize stage first (dvc repro tokenize)")
        return json.loads(path.read_text())

    def model_kwargs(self) -> dict:
        return {"vocab_size": self.meta["vocab_size"], "num_classes": self.num_classes}

    def chance(self, split: str = "val") -> tuple[float, int] | None:
        """The accuracy of always answering the split's most frequent class (its ``label_counts`` in meta.json, else
        its shards' labels), and the split's rows."""
        info = self.meta["splits"][split]
        counts = info.get("label_counts")
        if counts is None:
            labels = [
                read_parquet_checked(self.data_dir / s, ["label"]).column("label").to_numpy() for s in info["shards"]
            ]
            counts = np.bincount(np.concatenate(labels).astype(np.int64), minlength=self.num_classes).tolist()
        rows = int(sum(counts))
        return (max(counts) / rows if rows else 0.0), rows

    def max_seq_len(self) -> int:
        return self.meta["seq_len"]

    def load_split(self, split: str, seq_len: int | None = None) -> TokenizedTextDataset:
        """The tokenized ``split`` (train / val / test), re-truncated to ``seq_len`` when given."""
        _ = self.meta  # a missing meta.json is the first thing to report
        self.check_data((split,))  # the shards against the sizes and hashes meta.json records (where it does)
        ds = TokenizedTextDataset.from_parquet(self.data_dir, split, num_classes=self.num_classes)
        return ds.truncated(seq_len) if seq_len else ds

    def train_data(self, model_cfg) -> TokenizedTextDataset:
        return self.load_split("train", getattr(model_cfg, "seq_len", None))

    def split_items(self, split: str, folder: Path | None = None) -> dict[Path, list]:
        """Each row's review: its ``uid`` up to ``#`` (an augmented copy names its review), read from the ``uid``
        columns alone (IMDB's full splits: ~0.26 s on 2 cores)."""
        return shard_uids(folder or self.data_dir, split)

    def eval_data(self, split: str, model_cfg) -> TokenizedTextDataset:
        return self.load_split(split, getattr(model_cfg, "seq_len", None))

    def describe_data(self, train, val) -> dict:
        augment = self.meta.get("augment") or {}
        return {
            **super().describe_data(train, val),
            "seq_len": train.seq_len,
            "tokenized_seq_len": self.meta["seq_len"],
            "augment_enabled": augment.get("enabled"),
        }

    def forward(self, model: nn.Module, batch: dict) -> torch.Tensor:
        return model(batch["input_ids"], batch["attention_mask"])  # (B, num_classes)

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        return F.cross_entropy(outputs.float(), batch["label"])

    def new_metrics(self) -> ConfusionMatrix:
        return ConfusionMatrix(self.num_classes, positive=self.positive_class)

    def report(self, meter: ConfusionMatrix, out_dir: Path, *, title: str = "", name: str = "") -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        names = list(self.class_names) or [str(k) for k in range(self.num_classes)]
        accuracy = meter.compute()["accuracy"]
        path = out_dir / f"confusion_{name or self.name}.png"
        return [
            plots.confusion_matrix(meter.matrix, names, path, f"{title}: test accuracy {accuracy:.4f}" if title else "")
        ]
