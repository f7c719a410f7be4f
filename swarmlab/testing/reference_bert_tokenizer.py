"""A slow, independent pure-Python bert-base-uncased tokenizer (BasicTokenizer + WordPiece), the oracle
for the `tokenizers`-based fast path. Written from the BERT reference algorithm, not from the library."""

from __future__ import annotations

import unicodedata


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(
        lo <= cp <= hi
        for lo, hi in [
            (0x4E00, 0x9FFF),
            (0x3400, 0x4DBF),
            (0x20000, 0x2A6DF),
            (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F),
            (0x2B820, 0x2CEAF),
            (0xF900, 0xFAFF),
            (0x2F800, 0x2FA1F),
        ]
    )


def basic_tokenize(text: str) -> list[str]:
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        cleaned.append(" " if _is_whitespace(ch) else ch)
    text = "".join(f" {ch} " if _is_cjk(ord(ch)) else ch for ch in cleaned)
    out = []
    for word in text.strip().split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(ch for ch in word if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in word:
            if _is_punctuation(ch):
                if current:
                    out.append(current)
                out.append(ch)
                current = ""
            else:
                current += ch
        if current:
            out.append(current)
    return out


def wordpiece(word: str, vocab: dict[str, int], max_chars: int = 100) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                found = piece
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def encode(text: str, vocab: dict[str, int], seq_len: int) -> list[int]:
    tokens = [p for w in basic_tokenize(text) for p in wordpiece(w, vocab)]
    tokens = ["[CLS]"] + tokens[: seq_len - 2] + ["[SEP]"]
    return [vocab[t] for t in tokens]
