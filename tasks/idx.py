"""Reader and writer for idx files (the MNIST / Fashion-MNIST format), numpy only (no torch).

An idx file is a 4-byte magic number, one 4-byte big-endian size per dimension, then the data, big-endian,
row-major. The magic is 0x00 0x00, a type code, and the number of dimensions: 0x00000803 = uint8, 3-D
(images), 0x00000801 = uint8, 1-D (labels). Files may be gzip-compressed; that is detected from the gzip
magic bytes (1f 8b), not from the name. Every problem raises :class:`IdxError` (a ``SwarmlabError``, so a
stage prints it as one line) that names the file: not an idx file (foreign magic), a damaged gzip stream,
data shorter (truncated) or longer than the header says, or (``IdxMissingError``) no file at all.

``load_mnist_like(folder, split)`` finds the four standard files of a split under their usual names, with
or without ``.gz``. The shipped MNIST training images are named ``train-images-idx3-ubyte.APPROX.gz``:
they were rebuilt from per-image PNGs, 97.2% of the pixels exact and the rest off by at most 1/255
(datasets/README.md); such a split is returned with ``approximate=True``, and any figure made from it must
say so.
"""

from __future__ import annotations

import gzip as _gzip
import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swarmlab.errors import SwarmlabError  # imports nothing but the standard library: this module stays torch-free

GZIP_MAGIC = b"\x1f\x8b"
IMAGES_MAGIC = 0x00000803  # uint8, 3-D (N, rows, cols)
LABELS_MAGIC = 0x00000801  # uint8, 1-D (N,)

# idx type code -> big-endian numpy dtype
_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dt.newbyteorder("="): code for code, dt in _DTYPES.items()}


class IdxError(SwarmlabError, ValueError):
    """A damaged, truncated or foreign idx file; the message names the file."""


class IdxMissingError(IdxError, FileNotFoundError):
    """A split's idx file is not in the folder; the message names the folder and the names tried."""


def _describe(magic: int) -> str:
    code, ndim = (magic >> 8) & 0xFF, magic & 0xFF
    kind = _DTYPES[code].newbyteorder("=").name if code in _DTYPES else f"unknown type 0x{code:02x}"
    return f"0x{magic:08x} ({kind}, {ndim}-D)"


def _read_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    if not raw.startswith(GZIP_MAGIC):
        return raw
    try:
        return _gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:  # BadGzipFile is an OSError; a cut stream is EOFError
        raise IdxError(f"{path}: damaged or truncated gzip stream ({type(exc).__name__}: {exc})") from None


def read_idx(path: str | Path, *, expect_magic: int | None = None) -> np.ndarray:
    """The array stored in the idx file ``path`` (gzip or plain), in native byte order.

    ``expect_magic`` (e.g. :data:`IMAGES_MAGIC`) rejects any other type or number of dimensions.
    """
    return _parse(Path(path), _read_bytes(Path(path)), expect_magic)


def _parse(path: Path, data: bytes, expect_magic: int | None) -> np.ndarray:
    """``read_idx`` on the (decompressed) bytes ``data`` of ``path``."""
    if len(data) < 4:
        raise IdxError(f"{path}: truncated idx file: {len(data)} bytes, shorter than the 4-byte magic number")
    magic = int.from_bytes(data[:4], "big")
    code, ndim = data[2], data[3]
    if data[:2] != b"\x00\x00" or code not in _DTYPES or ndim == 0:
        raise IdxError(
            f"{path}: not an idx file: magic bytes {data[:4].hex()} (an idx file starts with "
            f"00 00, a type code and the number of dimensions)"
        )
    if expect_magic is not None and magic != expect_magic:
        raise IdxError(f"{path}: unexpected idx magic {_describe(magic)}, expected {_describe(expect_magic)}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxError(f"{path}: truncated idx file: {len(data)} bytes, the header alone needs {header}")
    dims = tuple(int.from_bytes(data[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndim))
    dtype = _DTYPES[code]
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    have = len(data) - header
    shape = "x".join(map(str, dims))
    if have < need:
        raise IdxError(
            f"{path}: truncated idx file: the header declares {shape} {dtype.newbyteorder('=').name} "
            f"= {need} bytes of data, the file has {have}"
        )
    if have > need:
        raise IdxError(
            f"{path}: damaged idx file: {have - need} bytes after the {need} bytes of data that the "
            f"header ({shape}) declares"
        )
    return (
        np.frombuffer(data, dtype=dtype, count=need // dtype.itemsize, offset=header)
        .reshape(dims)
        .astype(dtype.newbyteorder("="))
    )


def write_idx(path: str | Path, array: np.ndarray, *, gzip: bool = False) -> Path:
    """Write ``array`` (uint8, int8, int16, int32, float32 or float64; 1 to 255 dimensions) as an idx file."""
    path = Path(path)
    array = np.asarray(array)
    dtype = array.dtype.newbyteorder("=")
    if dtype not in _CODES:
        raise ValueError(f"idx cannot store dtype {array.dtype}; use one of {sorted(d.name for d in _CODES)}")
    if not 1 <= array.ndim <= 255:
        raise ValueError(f"idx stores 1 to 255 dimensions, got {array.ndim}")
    header = bytes([0, 0, _CODES[dtype], array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    payload = header + np.ascontiguousarray(array, dtype=dtype.newbyteorder(">")).tobytes()
    path.write_bytes(_gzip.compress(payload, mtime=0) if gzip else payload)
    return path


@dataclass(frozen=True)
class IdxSplit:
    images: np.ndarray  # (N, rows, cols) uint8
    labels: np.ndarray  # (N,) uint8
    approximate: bool  # True for MNIST's rebuilt training images (*.APPROX*): not the official bytes
    images_path: Path
    labels_path: Path
    images_md5: str = ""  # MD5 of the decompressed file: what the datasets publish (tasks/source_digests.py)
    labels_md5: str = ""


_PREFIX = {"train": "train", "test": "t10k"}


def _find(folder: Path, stem: str) -> Path:
    tried = [stem, f"{stem}.gz", f"{stem}.APPROX.gz", f"{stem}.APPROX"]  # exact files first
    for name in tried:
        if (folder / name).is_file():
            return folder / name
    raise IdxMissingError(f"{folder}: no {stem} file (looked for {', '.join(tried)})")


def load_mnist_like(folder: str | Path, split: str) -> IdxSplit:
    """Images and labels of ``split`` ("train" or "test") from an MNIST-layout folder."""
    if split not in _PREFIX:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = Path(folder)
    images_path = _find(folder, f"{_PREFIX[split]}-images-idx3-ubyte")
    labels_path = _find(folder, f"{_PREFIX[split]}-labels-idx1-ubyte")
    raw_images, raw_labels = _read_bytes(images_path), _read_bytes(labels_path)
    images = _parse(images_path, raw_images, IMAGES_MAGIC)
    labels = _parse(labels_path, raw_labels, LABELS_MAGIC)
    if len(images) != len(labels):
        raise IdxError(
            f"{folder}: {images_path.name} holds {len(images)} images but {labels_path.name} {len(labels)} labels"
        )
    approximate = "APPROX" in images_path.name or "APPROX" in labels_path.name
    md5 = lambda raw: hashlib.md5(raw, usedforsecurity=False).hexdigest()  # noqa: E731
    return IdxSplit(images, labels, approximate, images_path, labels_path, md5(raw_images), md5(raw_labels))
