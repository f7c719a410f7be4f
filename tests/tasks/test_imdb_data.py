import numpy as np
import pyarrow as pa
import pytest

from swarmlab.errors import SwarmlabError
from pipelines.prepare import prepare, split_tables
from tasks.imdb_sources import read_imdb
from tests.conftest import acl_members, write_acl_folder, write_acl_tarball, write_parquet_folder


def _as_rows(tables):
    return {
        s: sorted(
            zip(
                t.column("uid").to_pylist(),
                t.column("text").to_pylist(),
                t.column("label").to_pylist(),
                t.column("rating").to_pylist(),
            )
        )
        for s, t in tables.items()
    }


def test_all_three_layouts_read_the_same_reviews(tmp_path):
    files = acl_members(5)
    folder = write_acl_folder(tmp_path / "extracted", files)
    tarball = write_acl_tarball(tmp_path / "aclImdb_v1.tar.gz", files)
    parquet = write_parquet_folder(tmp_path / "pq", 5)
    from_folder, from_parent = read_imdb(folder), read_imdb(tmp_path / "extracted")
    from_tar, from_pq = read_imdb(tarball), read_imdb(parquet)
    assert _as_rows(from_folder) == _as_rows(from_tar) == _as_rows(from_pq) == _as_rows(from_parent)
    assert from_folder["train"].num_rows == 10  # unsup/ is not a labelled review
    assert set(from_tar["test"].column("uid").to_pylist()) == {
        f"test/{p}/{i}" for p in ("pos", "neg") for i in range(5)
    }


def test_binary_text_column_is_decoded(tmp_path):
    folder = write_parquet_folder(tmp_path / "pq", 3, text_type=pa.binary())
    assert read_imdb(folder)["train"].column("text").type == pa.string()


def test_missing_source_names_the_path(tmp_path):
    with pytest.raises(SwarmlabError, match=f"IMDB source {tmp_path / 'nope'} does not exist"):
        read_imdb(tmp_path / "nope")


def test_empty_review_is_named(tmp_path):
    def blank(split, rows):
        if split == "train":
            rows[3]["text"] = "   "

    folder = write_parquet_folder(tmp_path / "pq", 4, mutate=blank)
    with pytest.raises(SwarmlabError, match=r"review_id 3 \(label 0\) in .*imdb_train.parquet is an empty review"):
        read_imdb(folder)


def test_non_utf8_review_file_is_named(tmp_path):
    files = acl_members(3)
    files["aclImdb/train/pos/7_9.txt"] = b"caf\xe9 latin-1 bytes"
    with pytest.raises(SwarmlabError, match=r"aclImdb/train/pos/7_9.txt is not valid UTF-8 \(byte 3\)"):
        read_imdb(write_acl_folder(tmp_path, files))


def test_non_utf8_parquet_binary_is_named(tmp_path):
    def latin1(split, rows):
        rows[1]["text"] = b"\xff\xfe bad"

    folder = write_parquet_folder(tmp_path / "pq", 3, text_type=pa.binary(), mutate=latin1)
    with pytest.raises(SwarmlabError, match=r"review_id 1 \(label 0\) in .*imdb_train.parquet is not valid UTF-8"):
        read_imdb(folder)


def test_corrupted_tarball_and_parquet(tmp_path):
    bad = tmp_path / "aclImdb_v1.tar.gz"
    bad.write_bytes(b"\x1f\x8b\x08 not really gzip")
    with pytest.raises(SwarmlabError, match="the archive is damaged"):
        read_imdb(bad)
    folder = write_parquet_folder(tmp_path / "pq", 3)
    (folder / "imdb_test.parquet").write_bytes(b"PAR1garbagePAR1")
    with pytest.raises(SwarmlabError, match=r"cannot read .*imdb_test.parquet.*damaged"):
        read_imdb(folder)


def test_split_is_stratified_seeded_and_keeps_test_whole(tmp_path):
    tables = read_imdb(write_parquet_folder(tmp_path / "pq", 50))
    a = split_tables(tables, seed=1, val_fraction=0.1)
    b = split_tables(tables, seed=1, val_fraction=0.1)
    c = split_tables(tables, seed=2, val_fraction=0.1)
    assert a["val"].column("uid").to_pylist() == b["val"].column("uid").to_pylist()
    assert set(a["val"].column("uid").to_pylist()) != set(c["val"].column("uid").to_pylist())
    assert np.bincount(a["val"].column("label").to_numpy()).tolist() == [5, 5]
    train_uids, val_uids = set(a["train"].column("uid").to_pylist()), set(a["val"].column("uid").to_pylist())
    assert not train_uids & val_uids and len(train_uids | val_uids) == 100
    assert sorted(a["test"].column("uid").to_pylist()) == sorted(tables["test"].column("uid").to_pylist())
    assert a["train"].column("uid").to_pylist() != sorted(a["train"].column("uid").to_pylist())  # shuffled


def test_prepare_writes_shards_and_meta(tiny_params, tmp_path):
    meta = prepare(tiny_params, tmp_path / "prepared")
    assert meta["splits"]["train"]["rows"] == 32 and meta["splits"]["val"]["rows"] == 8
    assert meta["splits"]["test"]["rows"] == 40
    assert sorted(p.name for p in (tmp_path / "prepared").iterdir()) == [
        "meta.json",
        "test-000.parquet",
        "test-001.parquet",
        "train-000.parquet",
        "train-001.parquet",
        "val-000.parquet",
        "val-001.parquet",
    ]


def test_prepare_failure_leaves_no_output(tiny_params, tmp_path):
    tiny_params["prepare"]["val_fraction"] = 1.5
    with pytest.raises(SwarmlabError, match="prepare.val_fraction must be > 0 and < 1, got 1.5"):
        prepare(tiny_params, tmp_path / "prepared")
    assert list(tmp_path.glob("*prepared*")) == []
