"""IMDB sentiment (Maas et al. 2011): binary, positive = 1; accuracy, precision, recall, F1, confusion matrix.

Its data is built in three steps (``tasks/imdb_data.py``): ``prepare`` (the reviews, split), ``augment`` (the
training split augmented) and ``tokenize`` (the task's data folder), each a cached stage of its own.
"""

from __future__ import annotations

from pathlib import Path

from tasks import imdb_data
from tasks.registry import register_task
from tasks.text_classification import TextClassificationTask


@register_task
class ImdbTask(TextClassificationTask):
    name = "imdb"
    num_classes = 2
    positive_class = 1
    class_names = ("negative", "positive")
    split_files = "{split}-*.parquet"  # the tokenize step records each split's shards, sizes and SHA-256

    @property
    def rebuild_hint(self) -> str:
        return "dvc repro tokenize (after prepare and augment)"

    def data_steps(self) -> dict[str, Path]:
        """The prepared and the augmented splits beside the task's data folder (the tokenized splits)."""
        return {
            "prepare": self.data_dir.parent / "prepared",
            "augment": self.data_dir.parent / "augmented",
            "tokenize": self.data_dir,
        }

    def build_data(self, out_dir: Path, *, datasets: Path, seed: int, step: str | None = None, settings=None) -> dict:
        steps = self.data_steps()
        if step == "prepare":
            return imdb_data.prepare(settings, out_dir, datasets=datasets, seed=seed)
        if step == "augment":
            return imdb_data.augment(settings, steps["prepare"], out_dir, datasets=datasets, seed=seed)
        if step == "tokenize":
            return imdb_data.tokenize(settings, steps["augment"], out_dir, datasets=datasets)
        raise ValueError(f"{self.name} builds its data in steps {list(steps)}, not {step!r}")
