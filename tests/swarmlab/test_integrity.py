"""swarmlab/integrity.py: what a data stage records in meta.json, and the one-line refusals of a reader."""

from __future__ import annotations

import json

import pytest

from swarmlab.errors import SwarmlabError
from swarmlab.integrity import check_options, fingerprint, read_meta, record_files, verify_files

HINT = "python -m pipelines.data --task t"


@pytest.fixture
def folder(tmp_path):
    for name, data in (("train-000.parquet", b"a" * 100), ("train-001.parquet", b"b" * 50), ("val-000.parquet", b"c")):
        (tmp_path / name).write_bytes(data)
    meta = {
        "options": {"max_len": 256},
        "files": record_files(
            tmp_path, {"train": ["train-000.parquet", "train-001.parquet"], "val": ["val-000.parquet"]}
        ),
    }
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return tmp_path


def verify(folder, split="train"):
    verify_files(folder, read_meta(folder / "meta.json", HINT), split, f"{split}-*.parquet", HINT)


def test_an_intact_folder_passes_and_its_fingerprint_follows_the_content(folder):
    verify(folder)
    verify(folder, "val")
    before = fingerprint(read_meta(folder / "meta.json", HINT))
    (folder / "val-000.parquet").write_bytes(b"d")
    meta = json.loads((folder / "meta.json").read_text())
    meta["files"]["val"] = record_files(folder, {"val": ["val-000.parquet"]})["val"]
    assert fingerprint(meta) != before


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda f: (f / "train-001.parquet").unlink(), r"train-001\.parquet is missing \(meta\.json records 2 file"),
        (lambda f: (f / "train-002.parquet").write_bytes(b"x"), r"train-002\.parquet is not one of the train files"),
        (
            lambda f: (f / "train-000.parquet").write_bytes(b"a" * 99),
            r"train-000\.parquet has 99 bytes but meta\.json "
            r"recorded 100",
        ),
        (
            lambda f: (f / "train-000.parquet").write_bytes(b"a" * 99 + b"z"),
            r"train-000\.parquet does not match the "
            r"content hash",
        ),
    ],
)
def test_a_changed_split_is_one_line_naming_the_file(folder, damage, match):
    damage(folder)
    with pytest.raises(SwarmlabError, match=match) as info:
        verify(folder)
    assert "\n" not in str(info.value) and HINT in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [("{oops", "is not valid JSON"), ("[1]", "holds a JSON list"), (None, "is missing: build the task's data first")],
)
def test_meta_json_that_is_not_a_record_is_one_line(tmp_path, text, match):
    if text is not None:
        (tmp_path / "meta.json").write_text(text)
    with pytest.raises(SwarmlabError, match=match):
        read_meta(tmp_path / "meta.json", HINT)


def test_options_against_the_recorded_ones(folder):
    meta = read_meta(folder / "meta.json", HINT)
    check_options(meta, folder / "meta.json", {"max_len": 256}, "tasks.t.options", HINT)
    with pytest.raises(SwarmlabError, match=r"built with other options than tasks\.t\.options \(max_len 256 -> 512\)"):
        check_options(meta, folder / "meta.json", {"max_len": 512}, "tasks.t.options", HINT)
    with pytest.raises(SwarmlabError, match="records no content hash of the test split"):
        verify(folder, "test")
