"""Tokenized text splits in memory, and batching by index (one gather per batch, no per-sample Python)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from swarmlab.errors import SwarmlabError
from swarmlab.io import read_parquet_checked


class TokenizedTextDataset:
    """``input_ids`` (N, L) int32, ``lengths`` (N,), ``labels`` (N,) held as tensors.

    ``get_batch(idx)`` returns ``{"input_ids": (B, L) long, "attention_mask": (B, L) bool, "label": (B,) long}``.
    """

    def __init__(self, input_ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor, sep_id: int = 102):
        assert input_ids.ndim == 2 and len(input_ids) == len(lengths) == len(labels), "inconsistent split arrays"
        self.input_ids = input_ids
        self.lengths = lengths
        self.labels = labels
        self.sep_id = sep_id

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    def truncated(self, seq_len: int) -> "TokenizedTextDataset":
        """Re-truncate to ``seq_len`` exactly as the tokenizer would have: ``[CLS] w1..w(L-2) [SEP]``."""
        if seq_len == self.seq_len:
            return self
        if seq_len > self.seq_len:
            raise SwarmlabError(
                f"the model needs seq_len={seq_len} but the data was tokenized to {self.seq_len}: "
                f"raise tokenize.seq_len to at least {seq_len} and rerun the tokenize stage"
            )
        ids = self.input_ids[:, :seq_len].clone()
        cut = self.lengths > seq_len  # sequences that lose tokens get a fresh [SEP] at the end
        ids[cut, seq_len - 1] = self.sep_id
        return TokenizedTextDataset(ids, self.lengths.clamp(max=seq_len), self.labels, self.sep_id)

    def to(self, device) -> "TokenizedTextDataset":
        """A copy held on ``device`` (IMDB's train split at 256 tokens is 42 MB: it fits on any GPU)."""
        return TokenizedTextDataset(self.input_ids.to(device), self.lengths.to(device), self.labels.to(device), self.sep_id)

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        idx = idx.to(self.input_ids.device, non_blocking=True)
        ids = self.input_ids[idx].long()  # (B, L)
        positions = torch.arange(ids.shape[1], device=ids.device)
        return {
            "input_ids": ids,
            "attention_mask": positions[None, :] < self.lengths[idx, None],  # (B, L) True = real token
            "label": self.labels[idx].long(),
        }

    @classmethod
    def from_parquet(cls, folder: Path, split: str, *, num_classes: int | None = None) -> "TokenizedTextDataset":
        """Read ``<folder>/<split>-*.parquet`` shards written by the tokenize stage, checked against ``meta.json``.

        Every shard must have the columns and the fixed length meta.json states, token ids below its
        ``vocab_size``, lengths in 1..seq_len and labels in 0..num_classes-1: a violation is one line naming
        the shard and the row.
        """
        folder = Path(folder)
        meta_path = folder / "meta.json"
        if not meta_path.is_file():
            raise SwarmlabError(f"{meta_path} is missing: run the tokenize stage first (dvc repro tokenize)")
        try:
            meta = json.loads(meta_path.read_text())
            seq_len, vocab_size, sep_id = int(meta["seq_len"]), int(meta["vocab_size"]), int(meta["sep_id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SwarmlabError(f"{meta_path} is damaged ({type(exc).__name__}: {exc}): rerun the tokenize stage") from None
        shards = sorted(folder.glob(f"{split}-*.parquet"))
        if not shards:
            raise SwarmlabError(f"no {split}-*.parquet shards in {folder}: rerun the tokenize stage")
        ids, lengths, labels = [], [], []
        for shard in shards:
            t = read_parquet_checked(shard, None)
            missing = {"input_ids", "length", "label"} - set(t.column_names)
            if missing:
                raise SwarmlabError(f"{shard} lacks column(s) {sorted(missing)}: it was not written by the tokenize stage")
            flat = t.column("input_ids").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            if flat.size != t.num_rows * seq_len:
                raise SwarmlabError(f"{shard}: rows are not {seq_len} tokens long as {meta_path} says: rerun the tokenize stage")
            shard_ids = flat.reshape(t.num_rows, seq_len).astype(np.int64)
            shard_lengths = t.column("length").to_numpy(zero_copy_only=False).astype(np.int64)
            shard_labels = t.column("label").to_numpy(zero_copy_only=False).astype(np.int64)
            _check_rows(shard, shard_ids, shard_lengths, shard_labels, vocab_size, seq_len, num_classes, meta_path)
            ids.append(shard_ids.astype(np.int32))
            lengths.append(shard_lengths)
            labels.append(shard_labels)
        return cls(torch.from_numpy(np.concatenate(ids)), torch.from_numpy(np.concatenate(lengths)),
                   torch.from_numpy(np.concatenate(labels)), sep_id=sep_id)


def _check_rows(shard: Path, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray, vocab_size: int, seq_len: int,
                num_classes: int | None, meta_path: Path) -> None:
    """One line naming the shard and the first bad row, or nothing."""
    def first(bad: np.ndarray) -> int:
        return int(np.flatnonzero(bad)[0])

    bad = (ids < 0).any(axis=1) | (ids >= vocab_size).any(axis=1)
    if bad.any():
        r = first(bad)
        raise SwarmlabError(f"{shard} row {r}: token id {int(ids[r].max())} outside the vocabulary of {vocab_size} "
                            f"({meta_path}): the shard and meta.json do not belong together; rerun the tokenize stage")
    bad = (lengths < 1) | (lengths > seq_len)
    if bad.any():
        r = first(bad)
        raise SwarmlabError(f"{shard} row {r}: length {int(lengths[r])} outside 1..{seq_len}: rerun the tokenize stage")
    if num_classes is not None:
        bad = (labels < 0) | (labels >= num_classes)
        if bad.any():
            r = first(bad)
            raise SwarmlabError(f"{shard} row {r}: label {int(labels[r])} outside 0..{num_classes - 1} of the task's "
                                f"classes: check the data the prepare stage read")
