"""Stage `tokenize`: bert-base-uncased WordPiece over every split -> fixed-length uint16 ids + lengths.

Reads ``data/augmented`` shards (the prepared splits, train augmented), writes ``data/tokenized/{split}-NNN.parquet`` with columns
``uid``, ``input_ids`` (list<uint16> of exactly ``seq_len``), ``length`` and ``label``, and ``meta.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from swarmlab.stage_cli import params_from, stage_parser
from swarmlab.sections import section
from swarmlab.errors import SwarmlabError, cli
from swarmlab.io import atomic_dir, read_parquet_checked
from tasks.imdb_sources import check_review_table
from swarmlab.paths import DATA_DIR, datasets_dir, resolve
from swarmlab.text.encoding import encode_texts
from tasks.tokenization import PAD_ID, build_wordpiece, vocab_sha256

IN_DIR = DATA_DIR / "augmented"
OUT_DIR = DATA_DIR / "tokenized"


def ids_column(ids: np.ndarray) -> pa.Array:
    n, seq_len = ids.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(ids.reshape(-1), type=pa.uint16()), seq_len)


def tokenize(params: dict, in_dir: Path = IN_DIR, out_dir: Path = OUT_DIR) -> dict:
    cfg = section(params, "tokenize")
    seq_len = cfg.seq_len
    vocab_path = resolve(cfg.vocab, base=datasets_dir(params))
    tokenizer = build_wordpiece(vocab_path)  # encode_texts truncates; padding is a numpy fill (faster)
    vocab_size = tokenizer.get_vocab_size()
    if vocab_size > 65535:
        raise SwarmlabError(f"vocabulary of {vocab_size} tokens does not fit uint16 ids")
    meta_in = json.loads((in_dir / "meta.json").read_text()) if (in_dir / "meta.json").is_file() else None
    if meta_in is None:
        raise SwarmlabError(f"{in_dir / 'meta.json'} is missing: run the augment stage first (dvc repro augment)")
    t0, total = time.perf_counter(), 0
    meta = {
        "seq_len": seq_len,
        "vocab": str(vocab_path),
        "vocab_sha256": vocab_sha256(vocab_path),
        "vocab_size": vocab_size,
        "pad_id": PAD_ID,
        "cls_id": tokenizer.token_to_id("[CLS]"),
        "sep_id": tokenizer.token_to_id("[SEP]"),
        "augment": meta_in.get("config"),
        "splits": {},
    }
    with atomic_dir(out_dir) as tmp:
        for split, info in meta_in["splits"].items():
            truncated = 0
            for shard in info["shards"]:
                table = check_review_table(read_parquet_checked(in_dir / shard), in_dir / shard)
                texts = table.column("text").to_pylist()
                ids, lengths = encode_texts(tokenizer, texts, seq_len, desc=f"tokenize {shard}")
                truncated += int((lengths == seq_len).sum())
                out = pa.table(
                    {
                        "uid": table.column("uid"),
                        "input_ids": ids_column(ids),
                        "length": pa.array(lengths),
                        "label": table.column("label"),
                    }
                )
                pq.write_table(out, tmp / shard, compression="zstd")
                total += len(texts)
            meta["splits"][split] = {"rows": info["rows"], "shards": info["shards"], "at_max_length": truncated}
        elapsed = time.perf_counter() - t0  # printed, not stored: meta.json must not change when nothing else does
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(
        f"tokenize: {total} reviews to {seq_len} tokens in {elapsed:.1f} s ({total / elapsed:.0f} reviews/s) -> {out_dir}"
    )
    return meta


@cli
def main(argv=None) -> None:
    args = stage_parser(__doc__.splitlines()[0]).parse_args(argv)
    tokenize(params_from(args))


if __name__ == "__main__":
    main()
