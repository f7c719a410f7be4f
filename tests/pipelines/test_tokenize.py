import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasks.tokenization import encode_texts, is_plain_ascii
from tasks.text_data import TokenizedTextDataset
from tasks.tokenization import BERT_UNCASED_VOCAB_SHA256, build_wordpiece, vocab_sha256
from tests.conftest import SHARED_DATASETS
from swarmlab.testing.reference_bert_tokenizer import encode as reference_encode

VOCAB = SHARED_DATASETS / "bert_vocab" / "bert-base-uncased-vocab.txt"

TRICKY = [
    "Hello, World!",
    "Café au lait — naïve résumé",
    "unaffable",
    "I didn't like it...<br /><br />At ALL!!",
    "数学 and 中文 mixed",
    "tab\tnew\nline\r\x00ctrl\x07",
    "a" * 150,
    "$5.99 (2 for 1) @home #win 100%",
    "Ünïcödé ÅNGSTRÖM Œuvre",
    "emoji 🙂 and ☃ snow",
    "   leading and trailing   ",
    "vertical\x0btab form\x0cfeed unit\x1fsep DEL\x7fend",
    "SHOUTING In MiXeD CaSe",
    "tab\tnew\nline\r only",
]
# ASCII texts the normalizer treats differently from plain lower-casing (control characters are deleted
# there, not split on) and texts it only lower-cases.
ASCII_CASES = {
    "vertical\x0btab": False,
    "form\x0cfeed": False,
    "nul\x00byte": False,
    "DEL\x7fchar": False,
    "esc\x1b[0m": False,
    "tab\tnew\nline\rreturn": True,
    "SHOUTING In MiXeD CaSe!!": True,
    "I didn't like it...<br /><br />": True,
    "naïve": False,
    "": True,
}


@pytest.fixture(scope="module")
def vocab():
    return {line.rstrip("\n"): i for i, line in enumerate(VOCAB.open(encoding="utf-8"))}


def test_shipped_vocab_is_bert_base_uncased():
    assert vocab_sha256(VOCAB) == BERT_UNCASED_VOCAB_SHA256


def test_special_ids_and_known_pieces(vocab):
    tok = build_wordpiece(VOCAB, seq_len=12)
    enc = tok.encode("Hello, World! unaffable")
    assert enc.tokens[:9] == ["[CLS]", "hello", ",", "world", "!", "una", "##ffa", "##ble", "[SEP]"]
    assert enc.ids[0] == 101 and enc.ids[8] == 102 and enc.ids[9:] == [0, 0, 0]


def test_matches_a_slow_reference_on_tricky_and_real_text(vocab):
    real = pq.read_table(SHARED_DATASETS / "imdb" / "imdb_test.parquet", columns=["text"]).column("text").to_pylist()
    texts = TRICKY + real[::250]  # 100 real reviews spread over both labels
    for seq_len in (16, 64, 512):
        tok = build_wordpiece(VOCAB)
        tok.enable_truncation(max_length=seq_len)
        ids, lengths = encode_texts(tok, texts, seq_len)
        for i, text in enumerate(texts):
            expected = reference_encode(text, vocab, seq_len)
            assert lengths[i] == len(expected), text[:60]
            assert ids[i, : lengths[i]].tolist() == expected, text[:60]
            assert (ids[i, lengths[i] :] == 0).all()


def test_ascii_fast_path_equals_the_full_normalizer():
    """Reviews routed around BERT's normalizer get the ids the normalizer would have given them."""
    assert {text: is_plain_ascii(text) for text in ASCII_CASES} == ASCII_CASES
    real = pq.read_table(SHARED_DATASETS / "imdb" / "imdb_train.parquet", columns=["text"]).column("text").to_pylist()
    texts = list(ASCII_CASES) + TRICKY + real[::25]  # 1000 real reviews, about 10% of them not plain ASCII
    assert 0 < sum(map(is_plain_ascii, texts)) < len(texts)
    for seq_len in (8, 256):
        tok = build_wordpiece(VOCAB, seq_len=seq_len)  # the library alone: normalizer, truncation, padding
        expected = np.array([enc.ids for enc in tok.encode_batch(texts)], dtype=np.uint16)
        ids, lengths = encode_texts(build_wordpiece(VOCAB), texts, seq_len)
        assert np.array_equal(ids, expected)
        assert lengths.tolist() == [int((row != 0).sum()) for row in expected]


def test_prefix_cut_is_exact_for_long_texts(vocab):
    """Texts longer than the character cap: exact whether the prefix suffices or must be redone."""
    long_words = "x" * 40 + " " + "supercalifragilistic " * 200  # few tokens per character
    many_short = ". " * 5000  # one token per two characters: the 5*L char prefix holds >= L tokens
    tok = build_wordpiece(VOCAB)
    tok.enable_truncation(max_length=64)
    ids, lengths = encode_texts(tok, [long_words, many_short], 64)
    for i, text in enumerate([long_words, many_short]):
        assert ids[i, : lengths[i]].tolist() == reference_encode(text, vocab, 64)


def test_retruncation_equals_tokenizing_shorter(tiny_tokenized):
    meta = json.loads((tiny_tokenized / "meta.json").read_text())
    assert meta["seq_len"] == 32 and meta["pad_id"] == 0 and meta["sep_id"] == 102
    full = TokenizedTextDataset.from_parquet(tiny_tokenized, "train")
    short = full.truncated(12)
    tok = build_wordpiece(VOCAB)
    tok.enable_truncation(max_length=12)
    texts = []
    for shard in sorted((tiny_tokenized.parent / "prepared").glob("train-*.parquet")):
        texts += pq.read_table(shard, columns=["text"]).column("text").to_pylist()
    ids, lengths = encode_texts(tok, texts, 12)
    assert np.array_equal(short.input_ids.numpy(), ids.astype(np.int32))
    assert np.array_equal(short.lengths.numpy(), lengths.astype(np.int64))
    batch = short.get_batch(__import__("torch").arange(3))
    assert batch["attention_mask"].sum(1).tolist() == lengths[:3].tolist()


def test_model_longer_than_tokenized_is_a_clear_error(tiny_tokenized):
    from swarmlab.errors import SwarmlabError

    with pytest.raises(SwarmlabError, match="raise tokenize.seq_len to at least 64"):
        TokenizedTextDataset.from_parquet(tiny_tokenized, "val").truncated(64)
