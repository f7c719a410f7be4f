"""IMDB sentiment (Maas et al. 2011): binary, positive = 1; accuracy, precision, recall, F1, confusion matrix."""
from __future__ import annotations

from pathlib import Path

from tasks.base import TextClassificationTask
from tasks.registry import register_task
from tasks.text_data import TokenizedTextDataset


@register_task
class ImdbTask(TextClassificationTask):
    name = "imdb"
    num_classes = 2
    positive_class = 1
    monitor = "accuracy"
    mode = "max"
    class_names = ("negative", "positive")

    def load_split(self, data_dir: Path, split: str, seq_len: int | None = None) -> TokenizedTextDataset:
        """The tokenized ``split`` (train / val / test), re-truncated to ``seq_len`` when given."""
        ds = TokenizedTextDataset.from_parquet(data_dir, split)
        return ds.truncated(seq_len) if seq_len else ds
