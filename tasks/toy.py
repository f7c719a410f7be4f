"""``toy_counting``: a small endless task, the template for tasks whose training data is generated.

Sequences of random tokens; the label says whether token 1 occurs more often than token 2 among the
real (unpadded) tokens. Training batches come from an endless generator: with ``rng: numpy`` it draws
from numpy's global generator (the engine seeds it and carries its state in every checkpoint, so a
resumed run sees the same batches); with ``rng: step`` each batch depends only on (seed, step). The
validation and test splits are fixed sets drawn from their own seeds. Any text model fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from swarmlab.settings import check, setting
from tasks.base import EndlessData
from tasks.registry import register_task
from tasks.text_classification import TextClassificationTask
from tasks.text_data import TokenizedTextDataset

PAD = 0


@dataclass
class ToyOptions:
    seq_len: int = setting(16, ge=2)  # tokens per sequence (a model's own seq_len wins when it has one)
    vocab_size: int = setting(8, ge=3)  # ids 1..vocab_size-1 are drawn; 0 is padding
    min_fraction: float = setting(
        0.5, gt=0, le=1
    )  # real length ~ U{min_fraction * seq_len .. seq_len}; the rest is padding
    val_rows: int = setting(256, ge=1)
    test_rows: int = setting(256, ge=1)
    rng: str = setting(
        "numpy", choices=("numpy", "step")
    )  # numpy: numpy's global generator; step: seeded by (seed, step)

    def __post_init__(self):
        check(self, "tasks.toy_counting.options")


def draw(rng, n: int, seq_len: int, vocab_size: int, min_fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` sequences from ``rng`` (numpy's global module or a Generator): ids (n, L), lengths, labels."""
    randint = rng.randint if rng is np.random else rng.integers
    ids = randint(1, vocab_size, size=(n, seq_len))
    lengths = randint(max(1, int(np.ceil(min_fraction * seq_len))), seq_len + 1, size=n)
    ids[np.arange(seq_len)[None, :] >= lengths[:, None]] = PAD
    labels = ((ids == 1).sum(axis=1) > (ids == 2).sum(axis=1)).astype(np.int64)
    return ids.astype(np.int32), lengths.astype(np.int64), labels


def as_dataset(ids, lengths, labels) -> TokenizedTextDataset:
    return TokenizedTextDataset(torch.from_numpy(ids), torch.from_numpy(lengths), torch.from_numpy(labels))


class CountingStream(EndlessData):
    def __init__(self, options: ToyOptions, seq_len: int):
        self.options, self.seq_len = options, seq_len

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        o = self.options
        rng = np.random if o.rng == "numpy" else np.random.default_rng([seed, step])
        ds = as_dataset(*draw(rng, batch_size, self.seq_len, o.vocab_size, o.min_fraction))
        return ds.get_batch(torch.arange(batch_size))


@register_task
class ToyCountingTask(TextClassificationTask):
    name = "toy_counting"
    item_name = "sequences"
    Options = ToyOptions
    class_names = ("not more 1s", "more 1s")

    def _seq_len(self, model_cfg) -> int:
        return getattr(model_cfg, "seq_len", None) or self.options.seq_len

    def max_seq_len(self) -> None:
        return None  # generated at any length

    def model_kwargs(self) -> dict:
        return {"vocab_size": self.options.vocab_size, "num_classes": 2, "seq_len": self.options.seq_len}

    def train_data(self, model_cfg) -> CountingStream:
        return CountingStream(self.options, self._seq_len(model_cfg))

    def eval_data(self, split: str, model_cfg) -> TokenizedTextDataset:
        o = self.options
        rows, seed = {"val": (o.val_rows, 1), "test": (o.test_rows, 2)}[split]
        return as_dataset(
            *draw(np.random.default_rng([seed, 7919]), rows, self._seq_len(model_cfg), o.vocab_size, o.min_fraction)
        )

    def describe_data(self, train, val) -> dict:
        return {"val_rows": len(val), "seq_len": val.seq_len, "train": f"endless ({self.options.rng})"}
