"""bert-base-uncased WordPiece through the ``tokenizers`` library (Rust, parallel over a batch).

Matches ``BertTokenizer.from_pretrained('bert-base-uncased')``: clean text, split CJK characters,
lower-case, strip accents, split on whitespace and punctuation, greedy longest-match WordPiece with
``##`` continuations (``[UNK]`` past 100 characters), then ``[CLS] ... [SEP]``, truncated / padded
with ``[PAD]`` (id 0) to ``seq_len``.

``encode_texts`` gives the ids of the tokenizer's own ``encode`` truncated to ``seq_len`` for many texts, fast, by
shortcuts that leave them unchanged (tests/pipelines/test_tokenize.py); benchmarks/tokenize_throughput.py times it
against the plain ``encode_batch``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from swarmlab.errors import SwarmlabError
from swarmlab.progress import progress

BERT_UNCASED_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
PAD_ID = 0


def vocab_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_wordpiece(vocab_path: Path, seq_len: int | None = None):
    """A ``tokenizers.Tokenizer`` equivalent to bert-base-uncased; fixed length ``seq_len`` when given."""
    from tokenizers import (
        Tokenizer,
        normalizers,
        pre_tokenizers,
        processors,
    )  # tokenizers: only the tokenize step needs it
    from tokenizers.models import WordPiece

    vocab_path = Path(vocab_path)
    if not vocab_path.is_file():
        raise SwarmlabError(
            f"WordPiece vocabulary {vocab_path} not found: set tokenize.vocab (relative to paths.datasets)"
        )
    vocab = {}
    with open(vocab_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
        if special not in vocab:
            raise SwarmlabError(f"{vocab_path} lacks the special token {special}: is it a BERT vocabulary?")
    if vocab["[PAD]"] != PAD_ID:
        raise SwarmlabError(f"{vocab_path}: [PAD] must have id {PAD_ID}, has {vocab['[PAD]']}")
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    if seq_len is not None:
        if seq_len < 2:
            raise SwarmlabError(f"tokenize.seq_len must be at least 2 ([CLS] and [SEP]), got {seq_len}")
        tok.enable_truncation(max_length=seq_len)
        tok.enable_padding(length=seq_len, pad_id=PAD_ID, pad_token="[PAD]")
    return tok


# ----------------------------------------------------------------------------------- fast fixed-length encoding

CHUNK = 4096  # reviews per encode_batch call: large enough to keep the Rust thread pool busy


CHARS_PER_TOKEN_CAP = 5  # a review is cut after 5 * seq_len characters before tokenizing (see below)
# ASCII control characters other than tab, newline and carriage return: BERT's normalizer deletes them.
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _prefix(text: str, n_chars: int) -> str:
    """``text`` cut at the first space at or after ``n_chars`` (whole if there is none)."""
    if len(text) <= n_chars:
        return text
    cut = text.find(" ", n_chars)
    return text if cut < 0 else text[:cut]


def is_plain_ascii(text: str) -> bool:
    """True when BERT's normalizer would only lower-case ``text`` (ASCII, no control characters but \\t \\n \\r)."""
    return text.isascii() and _ASCII_CONTROL.search(text) is None


def _fixed_length_pair(tokenizer, seq_len: int):
    """Copies of ``tokenizer`` truncating at ``seq_len`` without padding: as given, and without its normalizer."""
    from tokenizers import Tokenizer  # tokenizers: only the tokenize step needs it

    full = Tokenizer.from_str(tokenizer.to_str())
    full.no_padding()
    full.enable_truncation(max_length=seq_len)
    plain = Tokenizer.from_str(full.to_str())
    plain.normalizer = None
    return full, plain


def _encode_prefixes(tokenizer, texts: list[str], seq_len: int) -> list[list[int]]:
    """Ids of each text from a prefix of it, tokenized again whole where the prefix gave too few tokens."""
    n_chars = CHARS_PER_TOKEN_CAP * seq_len
    prefixes = [_prefix(t, n_chars) for t in texts]
    rows = [enc.ids for enc in tokenizer.encode_batch_fast(prefixes)]
    redo = [j for j, (row, p, t) in enumerate(zip(rows, prefixes, texts)) if len(row) < seq_len and len(p) < len(t)]
    if redo:
        for j, enc in zip(redo, tokenizer.encode_batch_fast([texts[j] for j in redo])):
            rows[j] = enc.ids
    return rows


def encode_texts(tokenizer, texts: list[str], seq_len: int, desc: str = "tokenize") -> tuple[np.ndarray, np.ndarray]:
    """(N, seq_len) uint16 ids padded with [PAD]=0, and (N,) lengths (tokens before padding).

    ``tokenizer`` is the bert-base-uncased one of ``build_wordpiece``; the result equals its ``encode``
    truncated to ``seq_len``, by two shortcuts that leave the ids unchanged:

    * Truncation throws away everything past ``seq_len`` tokens, so only a prefix is tokenized: BERT's
      normalizer and pre-tokenizer act within whitespace-separated words, so a prefix ending at a space
      yields exactly the first tokens of the whole text. A prefix that yields fewer than ``seq_len``
      tokens is tokenized again whole.
    * On plain ASCII text (about 90% of IMDB reviews) the normalizer only lower-cases: accents, CJK and
      control characters are absent, and the tabs and newlines it turns into spaces are split on by the
      pre-tokenizer alike. Such reviews are lower-cased by ``str.lower`` and tokenized by a copy without
      the normalizer, which skips its per-character bookkeeping (about 1.7x faster); the others take the
      full path.
    """
    full, plain = _fixed_length_pair(tokenizer, seq_len)
    ids = np.full((len(texts), seq_len), PAD_ID, dtype=np.uint16)
    lengths = np.empty(len(texts), dtype=np.uint16)
    for start in progress(range(0, len(texts), CHUNK), desc=desc):
        chunk = texts[start : start + CHUNK]
        plain_ascii = [is_plain_ascii(t) for t in chunk]
        rows: list = [None] * len(chunk)
        for want, tok, prepare in ((True, plain, str.lower), (False, full, str)):
            group = [j for j, flag in enumerate(plain_ascii) if flag is want]
            for j, row in zip(group, _encode_prefixes(tok, [prepare(chunk[j]) for j in group], seq_len)):
                rows[j] = row
        for i, row in enumerate(rows, start):
            ids[i, : len(row)] = row
            lengths[i] = len(row)
    return ids, lengths
