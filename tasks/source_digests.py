"""The known digests of the raw source files, checked before a data stage builds from them (issue 39).

Each entry is the MD5 of a decompressed idx file, the digest the datasets publish for their raw files (the shared
copies' gunzipped MD5s equal the official ones, datasets/README.md; MNIST's training images are the shared rebuilt
``*.APPROX`` file, whose digest is its own). ``check_source`` refuses a file whose bytes are another known file's:
Fashion-MNIST's files in MNIST's folder, a test file named as a training file. A file that matches no known digest
(a copy of one's own, a test's generated data) is built from and reported as unknown: it is not the known data.
"""

from __future__ import annotations

from swarmlab.errors import SwarmlabError

KNOWN = {  # (dataset, file) -> MD5 of the decompressed idx file
    ("mnist", "train-images"): "ff31079e9f752de13a2ec1d4a52d8877",  # the rebuilt *.APPROX images
    ("mnist", "train-labels"): "a25bea736e30d166cdddb491f175f624",
    ("mnist", "t10k-images"): "2646ac647ad5339dbf082846283269ea",
    ("mnist", "t10k-labels"): "27ae3e4e09519cfbb04c329615203637",
    ("fashion_mnist", "train-images"): "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    ("fashion_mnist", "train-labels"): "9018921c3c673c538a1fc5bad174d6f9",
    ("fashion_mnist", "t10k-images"): "8181f5470baa50b63fa0f6fddb340f0a",
    ("fashion_mnist", "t10k-labels"): "15d484375f8d13e6eb1aabb0c3f46965",
}
_BY_DIGEST = {md5: key for key, md5 in KNOWN.items()}


def check_source(dataset: str, role: str, path, md5: str) -> bool:
    """True when ``path`` (``dataset``'s ``role`` file, e.g. ``train-images``) has its known digest, False when its
    digest is unknown; one line when it is another known file (another dataset's, or another role's)."""
    if KNOWN.get((dataset, role)) == md5:
        return True
    other = _BY_DIGEST.get(md5)
    if other is not None:
        raise SwarmlabError(
            f"{path} is {other[0]}'s {other[1]} file (MD5 {md5}), not {dataset}'s {role}: the {dataset} folder holds "
            f"another file's bytes; put {dataset}'s own files there (datasets/README.md)"
        )
    return False
