"""tasks/long_data.py: byte encoding, the ListOps generator against a separate evaluator, arXiv-11 loaders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tasks.long_data import (
    ARXIV11_CATEGORIES,
    BYTE_VOCAB_SIZE,
    CLS,
    LISTOPS_IDS,
    LISTOPS_OPERATORS,
    LISTOPS_VOCAB,
    NUM_SPECIAL,
    PAD,
    SEP,
    LongDataError,
    decode_bytes,
    encode_bytes,
    evaluate_listops,
    generate_listops,
    listops_depth,
    load_arxiv11,
    load_arxiv11_folders,
    tokenize_listops,
)


# ---- bytes ----------------------------------------------------------------------------------------------


def test_byte_encoding_ids_lengths_truncation():
    ids, lengths = encode_bytes(["hé", b"\x00\xff", "x" * 10], max_len=6)
    assert ids.dtype == np.uint16 and ids.shape == (3, 6) and lengths.tolist() == [3, 2, 6]
    assert ids[0, :3].tolist() == [ord("h") + 3, 0xC3 + 3, 0xA9 + 3]  # UTF-8 of é is C3 A9
    assert ids[1, :2].tolist() == [NUM_SPECIAL, 255 + NUM_SPECIAL] and (ids[1, 2:] == PAD).all()
    assert ids.max() < BYTE_VOCAB_SIZE == 259
    assert decode_bytes(ids[0, : lengths[0]]) == "hé".encode()
    ids, lengths = encode_bytes(["abcdef"], max_len=5, add_special=True)
    assert ids[0].tolist() == [CLS, ord("a") + 3, ord("b") + 3, ord("c") + 3, SEP] and lengths.tolist() == [5]


# ---- ListOps --------------------------------------------------------------------------------------------


def test_evaluator_on_known_expressions():
    assert evaluate_listops("[MAX 4 3 [MIN 2 3 ] 1 0 ]") == 4
    assert evaluate_listops("[MED 1 2 ]") == 1  # int(median) = int(1.5)
    assert evaluate_listops("[MED 3 8 1 0 ]") == 2  # (1 + 3) / 2
    assert evaluate_listops("[SM 9 9 [MED 3 8 1 0 ] ]") == 0  # 20 mod 10
    assert evaluate_listops("7") == 7
    for bad, match in [
        ("[MAX 1 2", "never closed"),
        ("[MAX ]", "no arguments"),
        ("[MAX 1 ] 2", "after the end"),
        ("[FOO 1 ]", "unexpected token"),
        ("12", "unexpected token"),
    ]:
        with pytest.raises(LongDataError, match=match):
            evaluate_listops(bad)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # LRA: depth <= 10, 10 args, 500 < tokens < 2000
        dict(min_length=0, max_length=40, max_depth=4, max_args=5),  # short ones, single digits included
    ],
)
def test_generator_labels_equal_the_evaluator_and_limits_hold(kwargs):
    n = 150
    texts, labels = generate_listops(n, seed=1, **kwargs)
    lo, hi = kwargs.get("min_length", 500), kwargs.get("max_length", 2000)
    max_depth = kwargs.get("max_depth", 10)
    assert len(texts) == n == len(set(texts)) and labels.dtype == np.int64
    assert [evaluate_listops(t) for t in texts] == labels.tolist()
    for t in texts:
        tokens = t.split()
        assert lo < len(tokens) < hi
        assert listops_depth(t) <= max_depth
        assert set(tokens) <= set(LISTOPS_VOCAB[NUM_SPECIAL:])
        assert sum(tok in LISTOPS_OPERATORS for tok in tokens) == tokens.count("]")
    assert set(labels.tolist()) <= set(range(10)) and len(set(labels.tolist())) >= 5
    assert max(listops_depth(t) for t in texts) >= min(max_depth, 4)  # deep trees do occur


def test_generator_is_seeded_and_depth_is_lra_counted():
    assert generate_listops(5, seed=3)[0] == generate_listops(5, seed=3)[0]
    assert generate_listops(5, seed=3)[0] != generate_listops(5, seed=4)[0]
    assert listops_depth("7") == 1 and listops_depth("[MAX 1 2 ]") == 2 and listops_depth("[MAX 1 [MIN 2 3 ] ]") == 3
    texts, _ = generate_listops(50, seed=0, min_length=0, max_length=100, max_depth=2)
    assert all(listops_depth(t) <= 2 for t in texts) and any(listops_depth(t) == 2 for t in texts)


def test_listops_tokenizer():
    ids, lengths = tokenize_listops(["[MAX 4 [SM 2 3 ] ]", "5"], max_len=8)
    assert ids.dtype == np.uint16 and lengths.tolist() == [7, 1]
    assert ids[0, :7].tolist() == [LISTOPS_IDS[t] for t in "[MAX 4 [SM 2 3 ] ]".split()] and ids[0, 7] == PAD
    assert len(LISTOPS_VOCAB) == 18 and LISTOPS_IDS["0"] == NUM_SPECIAL
    with pytest.raises(LongDataError, match="unknown token '\\('"):
        tokenize_listops(["( [MAX 1 2 ] )"])
    with pytest.raises(LongDataError, match="raise max_len"):
        tokenize_listops(["[MAX 1 2 ]"], max_len=3)


# ---- arXiv-11 -------------------------------------------------------------------------------------------


def _doc(label: int, i: int) -> str:
    return f"Document {i} of {ARXIV11_CATEGORIES[label]}.\nA long paper body about topic {label}. " * 3


def _write_folders(root, per_class=10):
    for label, name in enumerate(ARXIV11_CATEGORIES):
        folder = root / (name.lower() if name == "cs.CV" else name)  # the release spells it "cs.cv"
        folder.mkdir(parents=True)
        for i in range(per_class):
            (folder / f"{i:04d}.txt").write_text(_doc(label, i), encoding="utf-8")
        (folder / ".DS_Store").write_bytes(b"\x00\x01")  # ignored
    (root / "README").write_text("ignored")
    return root


def _write_jsonl(root, n=4):
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val", "test"):
        with open(root / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n * len(ARXIV11_CATEGORIES)):
                label = i % len(ARXIV11_CATEGORIES)
                value = label if i % 2 else ARXIV11_CATEGORIES[label]  # ints and names both accepted
                f.write(json.dumps({"text": _doc(label, i), "label": value, "id": i}) + "\n")
            f.write("\n")  # a trailing blank line is fine
    return root


def test_folder_layout_reads_and_splits_per_category(tmp_path):
    root = _write_folders(tmp_path / "arxiv")
    pool = load_arxiv11_folders(root)
    assert len(pool) == 110 and np.bincount(pool.labels).tolist() == [10] * 11
    assert pool.texts[0] == _doc(0, 0) and pool.texts[30] == _doc(3, 0)
    splits = load_arxiv11(root, val_fraction=0.2, test_fraction=0.1, seed=0)
    assert {k: len(v) for k, v in splits.items()} == {"train": 77, "val": 22, "test": 11}
    for split in splits.values():
        assert len(set(np.bincount(split.labels, minlength=11).tolist())) == 1  # same count in every class
    every = sorted(t for s in splits.values() for t in s.texts)
    assert every == sorted(pool.texts)  # a partition
    again = load_arxiv11(root, val_fraction=0.2, test_fraction=0.1, seed=0)
    assert again["test"].texts == splits["test"].texts


def test_jsonl_layout_reads_every_split(tmp_path):
    root = _write_jsonl(tmp_path / "arxiv_jsonl")
    splits = load_arxiv11(root)
    assert sorted(splits) == ["test", "train", "val"]
    assert len(splits["train"]) == 44 and splits["train"].labels[:12].tolist() == list(range(11)) + [0]
    assert splits["val"].texts[3] == _doc(3, 3)


@pytest.mark.parametrize(
    "line,match",
    [
        ('{"text": "abc", "label": 3', r"val\.jsonl:3: not valid JSON"),
        ('{"text": "abc"}', r'val\.jsonl:3: expected an object with "text" and "label"'),
        ('{"text": "abc", "label": 11}', r"val\.jsonl:3: label 11 is out of range 0\.\.10"),
        ('{"text": "abc", "label": "cs.XX"}', r"val\.jsonl:3: unknown category 'cs\.XX'"),
        ('{"text": "  ", "label": 1}', r'val\.jsonl:3: "text" must be a non-empty string'),
        ("[1, 2]", r"val\.jsonl:3: expected an object"),
    ],
)
def test_malformed_jsonl_is_a_one_line_error_naming_file_and_line(tmp_path, line, match):
    root = _write_jsonl(tmp_path / "bad")
    lines = (root / "val.jsonl").read_text().splitlines()
    lines[2] = line
    (root / "val.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(LongDataError, match=match) as info:
        load_arxiv11(root)
    assert "\n" not in str(info.value)


def test_malformed_folders_are_clear_errors(tmp_path):
    root = _write_folders(tmp_path / "a", per_class=2)
    (root / "math.ST" / "0001.txt").write_bytes(b"caf\xe9 latin-1")
    with pytest.raises(LongDataError, match=r"0001\.txt: not UTF-8 at byte 3"):
        load_arxiv11(root)
    assert load_arxiv11_folders(root, encoding_errors="replace").texts[-1] == "caf\ufffd latin-1"
    (root / "math.ST" / "0001.txt").write_text("   \n")
    with pytest.raises(LongDataError, match=r"0001\.txt: empty document"):
        load_arxiv11(root)
    (root / "math.ST" / "0001.txt").write_text("fine")
    (root / "q-bio.NC").mkdir()
    with pytest.raises(LongDataError, match=r"q-bio\.NC: unknown category folder"):
        load_arxiv11(root)
    (root / "q-bio.NC").rmdir()
    for p in (root / "cs.AI").iterdir():
        p.unlink()
    (root / "cs.AI").rmdir()
    with pytest.raises(LongDataError, match=r"missing category folder\(s\) cs\.AI"):
        load_arxiv11(root)
    (root / "train.jsonl").write_text('{"text": "a", "label": 0}\n')
    with pytest.raises(LongDataError, match="train.jsonl without test.jsonl"):
        load_arxiv11(root)


def test_listops_mean_tree_size_matches_draws_and_hopeless_settings_are_refused_up_front():
    import random

    from tasks.long_data import _generate_tree, check_listops_feasible, listops_expected_tokens

    rng = random.Random(0)
    sizes = []
    for _ in range(3000):
        out: list[str] = []
        _generate_tree(rng, 1, 10, 10, 0.25, out)
        sizes.append(len(out))
    assert listops_expected_tokens(10, 10) == pytest.approx(np.mean(sizes), rel=0.15)  # ~133 tokens
    assert check_listops_feasible(100, max_depth=6, max_args=10, min_length=20, max_length=256) > 0.05
    with pytest.raises(LongDataError, match="a drawn tree has ~"):
        check_listops_feasible(100, max_depth=6, max_args=1000, min_length=20, max_length=256)
    with pytest.raises(LongDataError, match="0 of .* trial draws were kept"):  # at most 5 tokens: never > 100
        check_listops_feasible(1000, max_depth=2, max_args=3, min_length=100, max_length=120)


def test_generate_listops_reports_progress_and_the_heartbeat_prints(capsys):
    from swarmlab.heartbeat import Heartbeat

    seen = []
    generate_listops(
        5, seed=0, max_depth=3, min_length=0, max_length=50, progress=lambda kept, tries: seen.append(kept)
    )
    assert seen and seen[0] == 0 and seen == sorted(seen) and seen[-1] <= 5
    beat = Heartbeat("data listops", 5, "expressions", every_s=0.0)
    beat.beat(3, "40 tries")
    assert "data listops: 3 of 5 expressions (40 tries)" in capsys.readouterr().out
