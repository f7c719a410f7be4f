"""Readers for IMDB (Maas et al. 2011) in every layout we meet, to one table of records.

Layouts: the shipped parquet folder (``imdb_{train,test}.parquet``), an extracted ``aclImdb/`` folder
(``{train,test}/{pos,neg}/<id>_<rating>.txt``), and the original ``aclImdb_v1.tar.gz``.
Each record: ``uid`` (``train/pos/123``, unique), ``text``, ``label`` (0 neg, 1 pos), ``rating``, ``review_id``.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from swarmlab.errors import SwarmlabError

SPLITS = ("train", "test")
LABELS = {"neg": 0, "pos": 1}
_FILE_RE = re.compile(r"(?:.*/)?aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt")

SCHEMA = pa.schema(
    [
        ("uid", pa.string()),
        ("text", pa.string()),
        ("label", pa.int8()),
        ("rating", pa.int8()),
        ("review_id", pa.int32()),
    ]
)


def _decode(raw: bytes, where: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SwarmlabError(
            f"{where} is not valid UTF-8 (byte {exc.start}): re-encode it as UTF-8 or delete it"
        ) from None
    return text


def _check_text(text: str, where: str) -> str:
    if not text.strip():
        raise SwarmlabError(f"{where} is an empty review: delete it or give it text")
    return text


def _records_to_table(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(records, schema=SCHEMA)


def read_parquet_folder(folder: Path) -> dict[str, pa.Table]:
    """``imdb_{train,test}.parquet`` with columns text (string or binary), label, rating, review_id."""
    out = {}
    for split in SPLITS:
        path = folder / f"imdb_{split}.parquet"
        if not path.is_file():
            raise SwarmlabError(
                f"IMDB split file {path} is missing: point prepare.source (or paths.datasets) at the folder holding imdb_train.parquet and imdb_test.parquet"
            )
        try:
            table = pq.read_table(path, columns=["text", "label", "rating", "review_id"])
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise SwarmlabError(
                f"cannot read {path}: {str(exc).splitlines()[0]}; the file is damaged, restore it from the source"
            ) from None
        texts = table.column("text")
        labels, ratings, ids = (table.column(c).to_pylist() for c in ("label", "rating", "review_id"))
        binary = pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type)
        records = []
        for i, raw in enumerate(texts.to_pylist()):
            label = labels[i]
            where = f"review_id {ids[i]} (label {label}) in {path}"
            if raw is None:
                raise SwarmlabError(f"{where} has no text (null): delete the row or give it text")
            text = _decode(raw, where) if binary else raw
            if label not in (0, 1):
                raise SwarmlabError(f"{where} has label {label!r}; IMDB labels are 0 (neg) or 1 (pos)")
            records.append(
                dict(
                    uid=f"{split}/{'pos' if label else 'neg'}/{ids[i]}",
                    text=_check_text(text, where),
                    label=label,
                    rating=ratings[i],
                    review_id=ids[i],
                )
            )
        out[split] = _records_to_table(records)
    return out


def _from_members(members, origin: str) -> dict[str, pa.Table]:
    """``members``: iterable of (relative path inside the archive/folder, bytes reader)."""
    records = {s: [] for s in SPLITS}
    for name, read in members:
        m = _FILE_RE.fullmatch(name)
        if not m:
            continue  # README, vocab, unsup/, urls_*.txt, feature files: not labelled reviews
        split, polarity, rid, rating = m.groups()
        where = f"{origin}:{name}"
        text = _check_text(_decode(read(), where), where)
        records[split].append(
            dict(
                uid=f"{split}/{polarity}/{rid}",
                text=text,
                label=LABELS[polarity],
                rating=int(rating),
                review_id=int(rid),
            )
        )
    for split in SPLITS:
        if not records[split]:
            raise SwarmlabError(
                f"{origin} holds no aclImdb/{split}/{{pos,neg}}/*.txt reviews: is it the aclImdb layout?"
            )
        records[split].sort(key=lambda r: (r["label"], r["review_id"]))  # the parquet order: label, then id
    return {s: _records_to_table(records[s]) for s in SPLITS}


def read_acl_folder(folder: Path) -> dict[str, pa.Table]:
    """An extracted ``aclImdb/`` folder (``folder`` may be aclImdb itself or its parent)."""
    root = folder if folder.name == "aclImdb" else folder / "aclImdb"
    if not root.is_dir():
        raise SwarmlabError(f"{folder} has no aclImdb/ folder")
    files = sorted(p for p in root.glob("*/*/*.txt"))
    members = ((f"aclImdb/{p.relative_to(root).as_posix()}", p.read_bytes) for p in files)
    return _from_members(members, str(root))


def read_acl_tarball(path: Path) -> dict[str, pa.Table]:
    """The original ``aclImdb_v1.tar.gz``, streamed without extracting."""
    try:
        with tarfile.open(path, "r:*") as tar:

            def members():
                for info in tar:
                    if info.isfile():
                        yield info.name, (lambda info=info: tar.extractfile(info).read())

            return _from_members(members(), str(path))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise SwarmlabError(f"cannot read {path}: {exc}; the archive is damaged, download it again") from None


def read_imdb(source: Path) -> dict[str, pa.Table]:
    """Read any supported layout at ``source`` (a folder or a tarball) into ``{'train','test'}`` tables."""
    source = Path(source)
    if not source.exists():
        raise SwarmlabError(
            f"IMDB source {source} does not exist: set prepare.source in params.yaml (or paths.datasets)"
        )
    if source.is_file():
        if source.name.endswith((".tar.gz", ".tgz", ".tar")):
            return read_acl_tarball(source)
        raise SwarmlabError(
            f"{source} is a file but not a .tar.gz archive: give the parquet folder, aclImdb/ or aclImdb_v1.tar.gz"
        )
    if (source / "imdb_train.parquet").exists() or (source / "imdb_test.parquet").exists():
        return read_parquet_folder(source)
    if (source / "aclImdb").is_dir() or source.name == "aclImdb":
        return read_acl_folder(source)
    tarball = source / "aclImdb_v1.tar.gz"
    if tarball.is_file():
        return read_acl_tarball(tarball)
    raise SwarmlabError(f"{source} holds neither imdb_*.parquet, aclImdb/ nor aclImdb_v1.tar.gz")


REVIEW_COLUMNS = ("uid", "text", "label")


def check_review_table(table: pa.Table, path: Path, *, labels: tuple[int, ...] = (0, 1)) -> pa.Table:
    """A prepared/augmented shard as the stages that read it expect it: the columns uid, text and label, a
    non-empty text in every row and labels among ``labels``; otherwise one line naming the file and row."""
    missing = [c for c in REVIEW_COLUMNS if c not in table.column_names]
    if missing:
        raise SwarmlabError(
            f"{path} lacks column(s) {missing}: it was not written by the prepare/augment stage; "
            f"rerun them (dvc repro --force prepare)"
        )
    for r, text in enumerate(table.column("text").to_pylist()):
        if not isinstance(text, str) or not text.strip():
            raise SwarmlabError(
                f"{path} row {r}: {'no' if text is None else 'an empty'} review text: rerun the stage that "
                f"wrote it (dvc repro --force prepare)"
            )
    for r, label in enumerate(table.column("label").to_pylist()):
        if label not in labels:
            raise SwarmlabError(f"{path} row {r}: label {label!r} is not one of {list(labels)}")
    return table
