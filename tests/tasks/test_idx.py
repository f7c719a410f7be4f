"""idx reader / writer (tasks/idx.py): round trips, gzip detection by magic, clear errors, MNIST layout."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tasks.idx import IMAGES_MAGIC, LABELS_MAGIC, IdxError, load_mnist_like, read_idx, write_idx
from tests.conftest import SHARED_DATASETS

REPO = Path(__file__).resolve().parents[2]


def images(n=5, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, 4, 3), dtype=np.uint8)


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip(tmp_path, compress):
    x, y = images(), np.arange(5, dtype=np.uint8)
    path = write_idx(tmp_path / "x", x, gzip=compress)
    assert path.read_bytes().startswith(b"\x1f\x8b") == compress
    out = read_idx(path, expect_magic=IMAGES_MAGIC)
    assert out.dtype == np.uint8 and out.shape == (5, 4, 3) and np.array_equal(out, x)
    out[0, 0, 0] = 1  # a normal, writeable array
    assert np.array_equal(read_idx(write_idx(tmp_path / "y", y, gzip=compress), expect_magic=LABELS_MAGIC), y)
    z = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)  # multi-byte types are stored big-endian
    assert np.array_equal(read_idx(write_idx(tmp_path / "z", z, gzip=compress)), z)


def test_header_bytes_are_the_standard_ones(tmp_path):
    raw = write_idx(tmp_path / "x", images()).read_bytes()
    assert raw[:16] == bytes.fromhex("00000803000000050000000400000003")


def test_gzip_is_detected_by_magic_not_by_name(tmp_path):
    x = images()
    plain_named_gz = tmp_path / "plain.gz"
    plain_named_gz.write_bytes(write_idx(tmp_path / "a", x).read_bytes())
    gzip_named_plain = tmp_path / "compressed.idx"
    gzip_named_plain.write_bytes(gzip.compress(write_idx(tmp_path / "b", x).read_bytes()))
    assert np.array_equal(read_idx(plain_named_gz), x) and np.array_equal(read_idx(gzip_named_plain), x)


@pytest.mark.parametrize("compress", [False, True])
def test_truncated_file_is_rejected_naming_it(tmp_path, compress):
    path = tmp_path / "cut-images-idx3-ubyte"
    path.write_bytes(write_idx(tmp_path / "full", images(), gzip=compress).read_bytes()[:-7])
    with pytest.raises(IdxError, match=rf"^{path}: .*truncated") as info:
        read_idx(path)
    assert "\n" not in str(info.value)


def test_truncated_uncompressed_payload_inside_valid_gzip(tmp_path):
    path = tmp_path / "short.gz"
    path.write_bytes(gzip.compress(write_idx(tmp_path / "full", images()).read_bytes()[:-1]))
    with pytest.raises(
        IdxError,
        match=r"truncated idx file: the header declares 5x4x3 uint8 = 60 bytes of data, "
        r"the file has 59",
    ):
        read_idx(path)


def test_trailing_bytes_are_rejected(tmp_path):
    path = tmp_path / "long"
    path.write_bytes(write_idx(tmp_path / "full", images()).read_bytes() + b"\0\0")
    with pytest.raises(IdxError, match=rf"^{path}: damaged idx file: 2 bytes after"):
        read_idx(path)


def test_wrong_magic_is_rejected_naming_the_file(tmp_path):
    png = tmp_path / "picture.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(IdxError, match=rf"^{png}: not an idx file: magic bytes 89504e47"):
        read_idx(png)
    labels = write_idx(tmp_path / "labels", np.arange(5, dtype=np.uint8))
    with pytest.raises(
        IdxError,
        match=rf"^{labels}: unexpected idx magic 0x00000801 \(uint8, 1-D\), "
        r"expected 0x00000803 \(uint8, 3-D\)",
    ):
        read_idx(labels, expect_magic=IMAGES_MAGIC)


def test_load_mnist_like_layout_and_approximate_flag(tmp_path):
    for prefix, n, suffix in (("train", 6, ".APPROX.gz"), ("t10k", 4, ".gz")):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte{suffix}", images(n), gzip=True)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n, dtype=np.uint8), gzip=True)
    train, test = load_mnist_like(tmp_path, "train"), load_mnist_like(tmp_path, "test")
    assert train.approximate and not test.approximate
    assert train.images.shape == (6, 4, 3) and test.labels.tolist() == [0, 1, 2, 3]
    write_idx(tmp_path / "train-images-idx3-ubyte", images(6))  # an exact copy wins over the approximate one
    assert not load_mnist_like(tmp_path, "train").approximate
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.arange(3, dtype=np.uint8))
    with pytest.raises(IdxError, match="4 images but t10k-labels-idx1-ubyte 3 labels"):
        load_mnist_like(tmp_path, "test")
    with pytest.raises(FileNotFoundError, match="no train-images-idx3-ubyte file"):
        load_mnist_like(tmp_path / "missing", "train")


def test_the_module_needs_no_torch():
    code = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('idx', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); sys.modules['idx'] = m; spec.loader.exec_module(m); "
        "assert 'torch' not in sys.modules, 'tasks/idx.py imported torch'"
    )
    subprocess.run([sys.executable, "-c", code, str(REPO / "tasks" / "idx.py")], check=True, cwd=REPO)


def test_errors_are_one_line_swarmlab_errors(tmp_path):
    from swarmlab.errors import SwarmlabError

    path = tmp_path / "x"
    path.write_bytes(write_idx(tmp_path / "full", images()).read_bytes()[:-1])
    with pytest.raises(SwarmlabError):  # the stages' @cli prints it as one line, exit status 2
        read_idx(path)
    with pytest.raises(SwarmlabError, match="no t10k-images-idx3-ubyte file"):
        load_mnist_like(tmp_path, "test")


@pytest.mark.slow
@pytest.mark.parametrize("name, approximate", [("mnist", True), ("fashion_mnist", False)])
def test_real_datasets_load(name, approximate):
    folder = SHARED_DATASETS / name
    if not folder.is_dir():
        pytest.skip(f"{folder} not present")
    train, test = load_mnist_like(folder, "train"), load_mnist_like(folder, "test")
    assert train.images.shape == (60_000, 28, 28) and test.images.shape == (10_000, 28, 28)
    assert train.labels.shape == (60_000,) and test.labels.shape == (10_000,)
    assert train.approximate is approximate and not test.approximate
    assert set(np.unique(test.labels)) == set(range(10)) and train.images.max() == 255
