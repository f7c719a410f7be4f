"""Tokenization throughput on 100k real IMDB reviews (train + test + 50k unlabelled), one process run.

Compares the stage's path (`tasks.tokenization.encode_texts`: prefix cut, plain-ASCII reviews lower-cased
in Python and tokenized without BERT's normalizer, encode_batch_fast, numpy padding) with the plain
`tokenizers` call (`encode_batch` on whole reviews, normalizer and padding in the library), and checks that
both give the same ids.

    python benchmarks/tokenize_throughput.py [--n 100000] [--seq-len 256] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np
import pyarrow.parquet as pq

from swarmlab.paths import datasets_dir
from tasks.tokenization import encode_texts
from tasks.tokenization import build_wordpiece


def load_texts(n: int) -> list[str]:
    folder = datasets_dir() / "imdb"
    texts: list[str] = []
    for name in ("imdb_train.parquet", "imdb_test.parquet", "imdb_unsup.parquet"):
        texts += pq.read_table(folder / name, columns=["text"]).column("text").to_pylist()
    return texts[:n]


def plain(tok_path, texts, seq_len):
    tok = build_wordpiece(tok_path, seq_len=seq_len)  # library truncation + padding
    encs = tok.encode_batch(texts)
    return np.array([e.ids for e in encs], dtype=np.uint16)


def fast(tok_path, texts, seq_len):
    return encode_texts(build_wordpiece(tok_path), texts, seq_len)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    vocab = datasets_dir() / "bert_vocab" / "bert-base-uncased-vocab.txt"
    texts = load_texts(args.n)
    print(
        f"{len(texts)} reviews, {sum(map(len, texts)) / len(texts):.0f} chars on average, seq_len {args.seq_len}, "
        f"{os.cpu_count()} CPUs, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'default')}"
    )
    times = {"plain encode_batch": [], "stage path": []}
    outputs = {}
    for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits both alike
        for name, fn in (("plain encode_batch", plain), ("stage path", fast)):
            cpu0, t0 = time.process_time(), time.perf_counter()
            outputs[name] = fn(vocab, texts, args.seq_len)
            times[name].append((time.perf_counter() - t0, time.process_time() - cpu0))
    assert np.array_equal(outputs["plain encode_batch"], outputs["stage path"]), "the two paths disagree"
    print("\n| path | wall s (median) | CPU s | reviews/s | vs plain |\n|---|---|---|---|---|")
    base = statistics.median(t for t, _ in times["plain encode_batch"])
    for name, ts in times.items():
        wall = statistics.median(t for t, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {len(texts) / wall:,.0f} | {base / wall:.2f}x |")
    print(
        f"\nidentical ids: yes; goal 100k reviews <= 20 s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )


if __name__ == "__main__":
    main()
