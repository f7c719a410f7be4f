"""bert-base-uncased WordPiece through the ``tokenizers`` library (Rust, parallel over a batch).

Matches ``BertTokenizer.from_pretrained('bert-base-uncased')``: clean text, split CJK characters,
lower-case, strip accents, split on whitespace and punctuation, greedy longest-match WordPiece with
``##`` continuations (``[UNK]`` past 100 characters), then ``[CLS] ... [SEP]``, truncated / padded
with ``[PAD]`` (id 0) to ``seq_len``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from swarmlab.errors import SwarmlabError

BERT_UNCASED_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
PAD_ID = 0


def vocab_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_wordpiece(vocab_path: Path, seq_len: int | None = None):
    """A ``tokenizers.Tokenizer`` equivalent to bert-base-uncased; fixed length ``seq_len`` when given."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
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
