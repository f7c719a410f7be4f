"""What a data stage recorded about its folder, and the checks a reader runs against it.

Every data folder a task builds (``data@<key>`` / ``derive@<key>``) ends with a ``meta.json`` that records, besides
the task's own facts, the options the data depends on and, per split, each file's size and SHA-256
(``record_files``). A stage that reads the folder checks, before it trusts a byte of it:

* ``read_meta``: ``meta.json`` exists, is JSON and is an object;
* ``check_options``: the options the folder was built with are the options in force now (a ``max_len`` raised in
  params.yaml without a rebuild is refused, not trained on silently);
* ``verify_files``: each split's files are exactly the recorded ones (a deleted or extra shard is named), with the
  recorded size and content hash (a truncated, replaced or edited file is named);
* ``check_disjoint``: no item of the validation or test split is in the training split (``Task.split_items`` names
  each row's item: its content, or its id where the data comes from a corpus that has ids); the data stage records
  the digests of the validation and test items (``write_items``: ``items.json``, hashed in ``meta.json``), so that
  training compares with the record and never opens the test files (``read_items``).

Every refusal is one line naming the file and saying how to rebuild. The hash costs one sequential read of the
split (SHA-256 runs at about 1-2 GB/s here; docs/reliability.md has the measured cost per training start).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from swarmlab.errors import SwarmlabError

META = "meta.json"
FILES_KEY = "files"  # meta.json: {split: {file name: {"bytes": int, "sha256": hex}}}


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def record_files(folder: Path, splits: dict[str, list[str]]) -> dict:
    """``{split: {name: {"bytes", "sha256"}}}`` of the named files of ``folder`` (for meta.json)."""
    folder = Path(folder)
    return {
        split: {
            name: {"bytes": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)}
            for name in sorted(names)
        }
        for split, names in splits.items()
    }


def read_meta(path: Path, hint: str) -> dict:
    """``meta.json`` as a dict; missing, unreadable or not a JSON object is one line ending in ``hint`` (how to
    rebuild the folder)."""
    path = Path(path)
    if not path.is_file():
        raise SwarmlabError(f"{path} is missing: build the task's data first: {hint}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" ({exc.msg} at line {exc.lineno} column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise SwarmlabError(
            f"{path} is not valid JSON{where}: the data folder is damaged; rebuild it: {hint}"
        ) from None
    except OSError as exc:
        raise SwarmlabError(f"cannot read {path}: {exc.strerror}; rebuild the data: {hint}") from None
    if not isinstance(meta, dict):
        raise SwarmlabError(
            f"{path} holds a JSON {type(meta).__name__}, not the data stage's record (an object): "
            f"rebuild the data: {hint}"
        )
    return meta


def check_options(meta: dict, meta_path: Path, current: dict, where: str, hint: str) -> None:
    """The options recorded in ``meta["options"]`` equal ``current`` (the options in force, ``where``)."""
    built = meta.get("options")
    if not isinstance(built, dict):
        raise SwarmlabError(f"{meta_path} records no options (built by an older version): rebuild the data: {hint}")
    differ = [f"{k} {built.get(k, '(unset)')!r} -> {v!r}" for k, v in current.items() if built.get(k, "(unset)") != v]
    if differ:
        raise SwarmlabError(
            f"{meta_path.parent} was built with other options than {where} ({', '.join(differ)}): rebuild it: {hint}"
        )


def verify_files(folder: Path, meta: dict, split: str, pattern: str, hint: str) -> None:
    """The files of ``split`` in ``folder`` (those matching ``pattern``, e.g. ``train-*.parquet``) are exactly those
    ``meta.json`` recorded, each with its recorded size and SHA-256."""
    folder = Path(folder)
    record = (meta.get(FILES_KEY) or {}).get(split) if isinstance(meta.get(FILES_KEY), dict) else None
    if not isinstance(record, dict) or not record:
        raise SwarmlabError(
            f"{folder / META} records no content hash of the {split} split (built by an older "
            f"version): rebuild the data: {hint}"
        )
    on_disk = sorted(p.name for p in folder.glob(pattern) if p.is_file())
    missing = [name for name in record if name not in on_disk]
    if missing:
        raise SwarmlabError(
            f"{folder / missing[0]} is missing ({META} records {len(record)} file(s) of the {split} "
            f"split): restore it (dvc checkout) or rebuild the data: {hint}"
        )
    extra = [name for name in on_disk if name not in record]
    if extra:
        raise SwarmlabError(
            f"{folder / extra[0]} is not one of the {split} files {META} records (left from another "
            f"build?): delete it, or rebuild the data: {hint}"
        )
    for name, info in record.items():
        path = folder / name
        size = path.stat().st_size
        if size != info.get("bytes"):
            raise SwarmlabError(
                f"{path} has {size} bytes but {META} recorded {info.get('bytes')}: the file was changed "
                f"or damaged; restore it (dvc checkout) or rebuild the data: {hint}"
            )
        if file_sha256(path) != info.get("sha256"):
            raise SwarmlabError(
                f"{path} does not match the content hash {META} recorded: the file was changed or "
                f"replaced; restore it (dvc checkout) or rebuild the data: {hint}"
            )


def fingerprint(meta: dict) -> str | None:
    """A short hash of the folder's recorded file hashes: what a run records as the data it was trained on."""
    files = meta.get(FILES_KEY)
    if not isinstance(files, dict):
        return None
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


ITEMS_FILE = "items.json"  # {split: sorted digests of its rows' items}, for val and test: what training compares with


def item_digest(key) -> str:
    """A short digest of one row's item key (its id, or its content's bytes)."""
    data = key.encode() if isinstance(key, str) else bytes(key)
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def write_items(folder: Path, items: dict[str, dict[Path, list]]) -> dict:
    """Record the digests of each split's items in ``folder/items.json``; returns what ``meta.json`` keeps of it (the
    file's SHA-256, so that an edited record is refused like an edited shard)."""
    record = {
        split: sorted({item_digest(k) for keys in files.values() for k in keys}) for split, files in items.items()
    }
    path = Path(folder) / ITEMS_FILE
    path.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    return {"file": ITEMS_FILE, "sha256": file_sha256(path), "splits": {s: len(d) for s, d in record.items()}}


def read_items(folder: Path, meta: dict, hint: str) -> dict[str, set[str]] | None:
    """The recorded digests per split (``write_items``), checked against ``meta.json``; None when none are recorded."""
    recorded = meta.get("items")
    if not recorded:
        return None
    path = Path(folder) / ITEMS_FILE
    if not path.is_file():
        raise SwarmlabError(f"{path} is missing (meta.json records it): restore it or rebuild the data: {hint}")
    if file_sha256(path) != recorded.get("sha256"):
        raise SwarmlabError(f"{path} does not match the content hash meta.json records: rebuild the data: {hint}")
    return {split: set(digests) for split, digests in json.loads(path.read_text()).items()}


def check_disjoint(train: dict[Path, list], others: dict[str, tuple[set[str], str]], item_name: str, hint: str) -> None:
    """Refuse a training split that holds an item of another split: ``train`` gives, per training file, one key per
    row naming its item; ``others`` gives, per split, the digests of its items and where they come from (a file, or
    the record ``items.json``). One line names the training file, the other split's source and one such item (its key
    when it is text, else its row)."""
    item = item_name[:-1] if item_name.endswith("s") else item_name
    for split, (digests, source) in others.items():
        for path, keys in train.items():
            rows = [i for i, k in enumerate(keys) if item_digest(k) in digests]
            if not rows:
                continue
            shared = {keys[i] for i in rows}
            texts = all(isinstance(k, str) for k in shared)
            example = min(shared) if texts else f"row {rows[0]}"
            raise SwarmlabError(
                f"{path} holds {len(shared)} {item}(s) of the {split} split ({source}, e.g. {example}): {split} "
                f"data must never reach training; rebuild the data: {hint}"
            )
