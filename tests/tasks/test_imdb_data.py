import json

import numpy as np
import pyarrow as pa
import pytest

from swarmlab.errors import SwarmlabError
from pipelines.data import build
from tasks.imdb_data import split_tables
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
    """Through the data stage, as `dvc repro prepare` runs it: the folder beside the task's data folder, and the
    step's summary in reports/data/imdb/prepare/."""
    tiny_params["tasks"]["imdb"]["options"]["data_dir"] = str(tmp_path / "tokenized")
    summary = build(tiny_params, "imdb", step="prepare", report_root=tmp_path / "reports")
    meta = json.loads((tmp_path / "prepared" / "meta.json").read_text())
    assert meta["splits"]["train"]["rows"] == 32 and meta["splits"]["val"]["rows"] == 8
    assert meta["splits"]["test"]["rows"] == 40
    assert summary == {"train_rows": 32, "val_rows": 8, "test_rows": 40}
    assert json.loads((tmp_path / "reports" / "data" / "imdb" / "prepare" / "metrics.json").read_text()) == summary
    assert not (tmp_path / "tokenized").exists()  # one step only
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
    tiny_params["tasks"]["imdb"]["options"]["data_dir"] = str(tmp_path / "work" / "tokenized")
    with pytest.raises(SwarmlabError, match="prepare.val_fraction must be > 0 and < 1, got 1.5"):
        build(tiny_params, "imdb", report_root=tmp_path / "work" / "reports")  # every step's settings before any folder
    assert not (tmp_path / "work").exists()


def test_the_data_stage_names_the_steps(tiny_params, tmp_path):
    tiny_params["tasks"]["imdb"]["options"]["data_dir"] = str(tmp_path / "work" / "tokenized")
    with pytest.raises(
        SwarmlabError, match="--step tokenise: task 'imdb' builds its data in the steps prepare, augment, tokenize"
    ):
        build(tiny_params, "imdb", step="tokenise", report_root=tmp_path / "work" / "reports")
    assert not (tmp_path / "work").exists()


def test_the_steps_in_order_match_the_steps_one_by_one(tiny_params, tmp_path):
    """`python -m pipelines.data --task imdb` (every step in order) writes what `dvc repro` (one stage per step)
    writes; the augment step off copies the prepared train split through, so no NLTK data is read."""
    tiny_params["augment"] = {"enabled": False}
    data_dir = {}
    for name in ("all", "steps"):
        tiny_params["tasks"]["imdb"]["options"]["data_dir"] = str(tmp_path / name / "tokenized")
        data_dir[name] = tmp_path / name
        if name == "all":
            build(tiny_params, "imdb", report_root=tmp_path / name / "reports")
        for step in ("prepare", "augment", "tokenize") if name == "steps" else ():
            build(tiny_params, "imdb", step=step, report_root=tmp_path / name / "reports")
    for folder in ("prepared", "augmented", "tokenized"):
        files = sorted(p.name for p in (data_dir["all"] / folder).iterdir())
        assert files == sorted(p.name for p in (data_dir["steps"] / folder).iterdir()) and "meta.json" in files
        for f in files:
            a, b = ((data_dir[n] / folder / f).read_bytes() for n in ("all", "steps"))
            if f != "meta.json":  # meta.json names its source folder
                assert a == b, f"{folder}/{f}"
    for step in ("prepare", "augment", "tokenize"):
        assert (data_dir["all"] / "reports" / "data" / "imdb" / step / "metrics.json").is_file()


# ------------------------------------------------------------------------------- no test review reaches training


def _imdb(params):
    from swarmlab.drive.runs import make_task

    return make_task(params, "imdb")


def _record_as_rebuilt(folder):
    """Rewrite meta.json's file record for the shards as they are now: what a stage would write had it built them,
    so that only the leak check stands between them and training."""
    from swarmlab.integrity import record_files

    meta = json.loads((folder / "meta.json").read_text())
    meta["files"] = record_files(folder, {s: i["shards"] for s, i in meta["splits"].items()})
    (folder / "meta.json").write_text(json.dumps(meta))


def test_every_step_records_its_shards_and_training_checks_them(tiny_params, tiny_tokenized):
    import shutil

    for folder in (tiny_tokenized.parent / "prepared", tiny_tokenized):
        meta = json.loads((folder / "meta.json").read_text())
        assert set(meta["files"]) == {"train", "val", "test"}
        assert sorted(meta["files"]["train"]) == meta["splits"]["train"]["shards"]
    task = _imdb(tiny_params)
    assert task.data_fingerprint()  # runs record what they trained on, and evaluate checks it
    task.train_data(None)
    shutil.copyfile(tiny_tokenized / "test-000.parquet", tiny_tokenized / "train-001.parquet")
    with pytest.raises(SwarmlabError, match=r"train-001.parquet (has \d+ bytes but|does not match the content)"):
        _imdb(tiny_params).train_data(None)
    (tiny_tokenized / "train-001.parquet").unlink()
    with pytest.raises(SwarmlabError, match=r"train-001.parquet is missing \(meta.json records 2 file\(s\)"):
        _imdb(tiny_params).train_data(None)


def test_a_training_split_holding_test_or_val_reviews_is_refused(tiny_params, tiny_tokenized):
    import shutil

    meta = json.loads((tiny_tokenized / "meta.json").read_text())
    assert meta["items"]["splits"] == {"val": 8, "test": 40}  # the reviews of val and test, recorded by digest
    _imdb(tiny_params).train_data(None)
    shutil.copyfile(tiny_tokenized / "test-000.parquet", tiny_tokenized / "train-001.parquet")
    _record_as_rebuilt(tiny_tokenized)  # even with a record that matches the swapped shard
    with pytest.raises(
        SwarmlabError,
        match=r"train-001.parquet holds 20 review\(s\) of the test split \(recorded in .*items.json, e.g. test/",
    ):
        _imdb(tiny_params).train_data(None)
    shutil.copyfile(tiny_tokenized / "val-000.parquet", tiny_tokenized / "train-001.parquet")
    _record_as_rebuilt(tiny_tokenized)
    with pytest.raises(SwarmlabError, match=r"review\(s\) of the val split"):
        _imdb(tiny_params).train_data(None)
    (tiny_tokenized / "items.json").unlink()  # the record gone: refused, not skipped
    with pytest.raises(SwarmlabError, match=r"items.json is missing \(meta.json records it\)"):
        _imdb(tiny_params).train_data(None)
    meta = json.loads((tiny_tokenized / "meta.json").read_text())
    del meta["items"]  # a folder built without a record: the val and test files are read instead
    (tiny_tokenized / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SwarmlabError, match=r"train-001.parquet holds \d+ review\(s\) of the val split \(.*val-000"):
        _imdb(tiny_params).train_data(None)
    (tiny_tokenized / "train-001.parquet").write_bytes(b"PAR1 cut short")  # a damaged shard: one line naming it
    _record_as_rebuilt(tiny_tokenized)
    with pytest.raises(SwarmlabError, match=r"cannot read .*train-001.parquet: .*the shard is damaged"):
        _imdb(tiny_params).train_data(None)


def test_a_step_refuses_an_edited_or_damaged_folder_before_it(tiny_params, tmp_path):
    from tests.conftest import imdb_step

    prepared = tmp_path / "steps" / "prepared"
    imdb_step(tiny_params, "prepare", prepared)
    meta = json.loads((prepared / "meta.json").read_text())
    meta["splits"]["train"]["rows"] = 30
    (prepared / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SwarmlabError, match=r"says the train split has 30 rows, but its shards hold 32"):
        imdb_step(tiny_params, "augment", tmp_path / "steps" / "augmented", prepared)
    meta["splits"]["train"]["rows"] = 32
    (prepared / "meta.json").write_text(json.dumps(meta))
    (prepared / "test-001.parquet").unlink()
    with pytest.raises(SwarmlabError, match=r"test-001.parquet is missing"):
        imdb_step(tiny_params, "tokenize", tmp_path / "steps" / "tokenized", prepared)


def test_chance_is_the_share_of_the_splits_most_frequent_class(tiny_params, tiny_tokenized):
    """What a model that learned nothing scores (a sweep's "did not learn at this budget", swarmlab/drive/tuning.py):
    from the shards' labels where meta.json records no label counts (IMDB), else from the counts."""
    import pyarrow.parquet as pq

    task = _imdb(tiny_params)
    meta = json.loads((tiny_tokenized / "meta.json").read_text())
    for split in ("val", "test"):
        labels = [
            x for s in meta["splits"][split]["shards"] for x in pq.read_table(tiny_tokenized / s)["label"].to_pylist()
        ]
        share, rows = task.chance(split)
        assert rows == len(labels) == meta["splits"][split]["rows"]
        assert share == max(labels.count(0), labels.count(1)) / rows
    meta["splits"]["val"]["label_counts"] = [3, 9]  # a data stage that counts them (the long tasks) is read as written
    (tiny_tokenized / "meta.json").write_text(json.dumps(meta))
    assert _imdb(tiny_params).chance("val") == (0.75, 12)
