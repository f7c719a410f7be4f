"""Tokenized text splits in memory, and batching by index (one gather per batch, no per-sample Python)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from swarmlab.errors import SwarmlabError
from swarmlab.io import read_parquet_checked


class TokenizedTextDataset:
    """``input_ids`` (N, L) int16/int32, ``lengths`` (N,), ``labels`` (N,) held as tensors.

    ``get_batch(idx)`` returns ``{"input_ids": (B, W) long, "attention_mask": (B, W) bool, "label": (B,) long}``
    with W = L, or, with ``trim_multiple`` > 0, W = the batch's longest real row rounded up to a multiple of
    ``trim_multiple`` (at most L): the columns cut off are padding in every row of the batch, which a model that
    masks padding ignores anyway (the long-document tasks, where most of a 4096-byte row is padding).
    :class:`LengthGroupedTextDataset` adds the batch plan that makes trimming pay in training too.

    Args:
        sep_id: the id ``truncated`` writes last in a row it cuts (the tokenizer's ``[SEP]``); None = cut only.
        trim_multiple: 0 = every batch has all L columns.
    """

    def __init__(
        self,
        input_ids: torch.Tensor,
        lengths: torch.Tensor,
        labels: torch.Tensor,
        sep_id: int | None = 102,
        *,
        trim_multiple: int = 0,
    ):
        assert input_ids.ndim == 2 and len(input_ids) == len(lengths) == len(labels), "inconsistent split arrays"
        assert isinstance(trim_multiple, int) and trim_multiple >= 0, "trim_multiple must be an int >= 0"
        self.input_ids = input_ids
        self.lengths = lengths
        self.labels = labels
        self.sep_id = sep_id
        self.trim_multiple = trim_multiple
        # the lengths on the host: a batch's width is read without a device sync
        self.host_lengths = lengths.cpu().numpy() if trim_multiple else None

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    def _replace(self, input_ids, lengths, labels) -> "TokenizedTextDataset":
        return type(self)(input_ids, lengths, labels, self.sep_id, trim_multiple=self.trim_multiple)

    def truncated(self, seq_len: int) -> "TokenizedTextDataset":
        """Re-truncate to ``seq_len`` exactly as the tokenizer would have: ``[CLS] w1..w(L-2) [SEP]`` (with
        ``sep_id`` None: the first ``seq_len`` ids)."""
        if seq_len == self.seq_len:
            return self
        if seq_len > self.seq_len:
            raise SwarmlabError(
                f"the model needs seq_len={seq_len} but the data was tokenized to {self.seq_len}: "
                f"raise tokenize.seq_len to at least {seq_len} and rerun the tokenize stage"
            )
        ids = self.input_ids[:, :seq_len].clone()
        if self.sep_id is not None:
            cut = self.lengths > seq_len  # sequences that lose tokens get a fresh [SEP] at the end
            ids[cut, seq_len - 1] = self.sep_id
        return self._replace(ids, self.lengths.clamp(max=seq_len), self.labels)

    def sorted_by_length(self, descending: bool = True) -> "TokenizedTextDataset":
        """The same rows ordered by length (stable), so that consecutive batches of an evaluation trim alike."""
        order = torch.from_numpy(
            np.argsort(-self.lengths.cpu().numpy() if descending else self.lengths.cpu().numpy(), kind="stable")
        )
        return self._replace(self.input_ids[order], self.lengths[order], self.labels[order])

    def to(self, device) -> "TokenizedTextDataset":
        """A copy held on ``device`` (IMDB's train split at 256 tokens is 42 MB: it fits on any GPU)."""
        return self._replace(self.input_ids.to(device), self.lengths.to(device), self.labels.to(device))

    def batch_width(self, idx: torch.Tensor) -> int:
        """Columns of the batch ``idx``: L, or its longest row rounded up to ``trim_multiple`` (at most L)."""
        if not self.trim_multiple:
            return self.seq_len
        longest = int(self.host_lengths[idx.cpu().numpy()].max()) if len(idx) else 1
        m = self.trim_multiple
        return min(self.seq_len, max(m, -(-longest // m) * m))

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        width = self.batch_width(idx)
        idx = idx.to(self.input_ids.device, non_blocking=True)
        ids = self.input_ids[idx, :width].long()  # (B, W)
        positions = torch.arange(width, device=ids.device)
        return {
            "input_ids": ids,
            "attention_mask": positions[None, :] < self.lengths[idx, None],  # (B, W) True = real token
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
            raise SwarmlabError(
                f"{meta_path} is damaged ({type(exc).__name__}: {exc}): rerun the tokenize stage"
            ) from None
        shards = sorted(folder.glob(f"{split}-*.parquet"))
        if not shards:
            raise SwarmlabError(f"no {split}-*.parquet shards in {folder}: rerun the tokenize stage")
        ids, lengths, labels = [], [], []
        for shard in shards:
            t = read_parquet_checked(shard, None)
            missing = {"input_ids", "length", "label"} - set(t.column_names)
            if missing:
                raise SwarmlabError(
                    f"{shard} lacks column(s) {sorted(missing)}: it was not written by the tokenize stage"
                )
            flat = t.column("input_ids").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            if flat.size != t.num_rows * seq_len:
                raise SwarmlabError(
                    f"{shard}: rows are not {seq_len} tokens long as {meta_path} says: rerun the tokenize stage"
                )
            shard_ids = flat.reshape(t.num_rows, seq_len).astype(np.int64)
            shard_lengths = t.column("length").to_numpy(zero_copy_only=False).astype(np.int64)
            shard_labels = t.column("label").to_numpy(zero_copy_only=False).astype(np.int64)
            _check_rows(shard, shard_ids, shard_lengths, shard_labels, vocab_size, seq_len, num_classes, meta_path)
            ids.append(shard_ids.astype(np.int32))
            lengths.append(shard_lengths)
            labels.append(shard_labels)
        return cls(
            torch.from_numpy(np.concatenate(ids)),
            torch.from_numpy(np.concatenate(lengths)),
            torch.from_numpy(np.concatenate(labels)),
            sep_id=sep_id,
        )


def _check_rows(
    shard: Path,
    ids: np.ndarray,
    lengths: np.ndarray,
    labels: np.ndarray,
    vocab_size: int,
    seq_len: int,
    num_classes: int | None,
    meta_path: Path,
) -> None:
    """One line naming the shard and the first bad row, or nothing."""

    def first(bad: np.ndarray) -> int:
        return int(np.flatnonzero(bad)[0])

    bad = (ids < 0).any(axis=1) | (ids >= vocab_size).any(axis=1)
    if bad.any():
        r = first(bad)
        raise SwarmlabError(
            f"{shard} row {r}: token id {int(ids[r].max())} outside the vocabulary of {vocab_size} "
            f"({meta_path}): the shard and meta.json do not belong together; rerun the tokenize stage"
        )
    bad = (lengths < 1) | (lengths > seq_len)
    if bad.any():
        r = first(bad)
        raise SwarmlabError(f"{shard} row {r}: length {int(lengths[r])} outside 1..{seq_len}: rerun the tokenize stage")
    if num_classes is not None:
        bad = (labels < 0) | (labels >= num_classes)
        if bad.any():
            r = first(bad)
            raise SwarmlabError(
                f"{shard} row {r}: label {int(labels[r])} outside 0..{num_classes - 1} of the task's "
                f"classes: check the data the prepare stage read"
            )


class LengthGroupedTextDataset(TokenizedTextDataset):
    """A split whose training batches hold rows of similar length, trimmed to their longest row.

    ``batch_plan`` (the engine's hook for a dataset's own grouping): a seeded shuffle cut into pools of
    ``POOL_BATCHES`` batches, each pool sorted by length and cut into batches, and the batches shuffled; every
    row once per epoch, as with a plain shuffle. ``trim_multiple`` must be > 0.
    """

    POOL_BATCHES = 32  # batches per length-sorted pool: similar lengths within a batch, a random mix across

    def __init__(self, input_ids, lengths, labels, sep_id: int | None = None, *, trim_multiple: int = 128):
        if not trim_multiple:
            raise ValueError("LengthGroupedTextDataset trims its batches: trim_multiple must be > 0")
        super().__init__(input_ids, lengths, labels, sep_id, trim_multiple=trim_multiple)

    def batch_plan(self, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
        order = torch.randperm(len(self), generator=generator)
        batches = []
        for pool in order.split(batch_size * self.POOL_BATCHES):
            pool = pool[torch.from_numpy(np.argsort(self.host_lengths[pool.numpy()], kind="stable"))]
            batches += list(pool.split(batch_size))
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
