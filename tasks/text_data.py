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
    def from_parquet(cls, folder: Path, split: str) -> "TokenizedTextDataset":
        """Read ``<folder>/<split>-*.parquet`` shards written by the tokenize stage."""
        folder = Path(folder)
        meta_path = folder / "meta.json"
        if not meta_path.is_file():
            raise SwarmlabError(f"{meta_path} is missing: run the tokenize stage first (dvc repro tokenize)")
        meta = json.loads(meta_path.read_text())
        shards = sorted(folder.glob(f"{split}-*.parquet"))
        if not shards:
            raise SwarmlabError(f"no {split}-*.parquet shards in {folder}: rerun the tokenize stage")
        ids, lengths, labels = [], [], []
        for shard in shards:
            t = read_parquet_checked(shard, ["input_ids", "length", "label"])
            flat = t.column("input_ids").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            ids.append(flat.reshape(t.num_rows, meta["seq_len"]).astype(np.int32))
            lengths.append(t.column("length").to_numpy().astype(np.int64))
            labels.append(t.column("label").to_numpy().astype(np.int64))
        return cls(torch.from_numpy(np.concatenate(ids)), torch.from_numpy(np.concatenate(lengths)),
                   torch.from_numpy(np.concatenate(labels)), sep_id=meta["sep_id"])
