"""``image_generation``: class-conditional 8-bit image modelling, one 256-way categorical per sub-pixel (paper 003
§4.3: the SWARM Transformer on MNIST and Fashion-MNIST). Any ``kind="image"`` model fits:
``model(pixels (B, C, H, W) long, labels (B,)) -> logits (B, 256, C, H, W)``, and for samples
``model.sample(labels, *, generator, temperature)``.

* **data** (``build_data``, the generic ``data@<key>`` stage): the idx files under ``<datasets>/<dataset>`` (read by
  tasks/idx.py: no torchvision, no download) become ``train.npz``, ``val.npz``, ``test.npz`` (``images`` uint8
  (N, C, H, W), ``labels`` uint8 (N,), ``index`` int32: the row in the source file) and ``meta.json``. The
  validation split is ``val_size`` images drawn from the official training split with ``split_seed``; the test
  split is the official one, whole (only ``max_test`` caps it, for smoke runs). npz, not parquet: the images
  are dense fixed-shape uint8 arrays, which npz stores with their shape and dtype and numpy reads back in
  ~0.1 s (uncompressed; compressed Fashion-MNIST would save 45% of 47 MB but take 2.4 s to write and 0.4 s
  to read at every stage); three files per dataset suit DVC; parquet would need a list column and a reshape.
* **MNIST's training images are approximate** (the shipped file was rebuilt from PNGs: 97.2% of the pixels
  exact, the rest off by at most 1/255; tasks/idx.py). ``meta.json`` says ``approximate_train_images: true``,
  and so do the data summary, ``describe_data`` (train runs), the meters' ``extras`` (evaluate metrics), the
  figures' titles and the samples' summary. The MNIST validation split comes from those images too; the
  test split is exact. The approximation is not harmless for likelihoods: 29 of the 256 values never occur
  in the approximate training images but make up 1.4% of the test pixels, which a 256-way model then finds
  nearly impossible (``meta.json``: ``test_values_unseen_in_train``, ``test_pixels_unseen_in_train``).
* **loss**: the mean cross-entropy per sub-pixel in nats, in fp32. ``forward`` returns the logits and each
  image's summed nats, so the loss and the meter share one cross-entropy pass;
* **metrics**: ``loss`` (nats per sub-pixel) and ``bits_per_dim`` = loss / ln 2, accumulated on the device in
  float64, plus bits/dim per class in ``extras``;
* **samples** (``sample``, the generic ``sample@<key>`` stage): a seeded grid of class-conditional samples,
  one row per class, drawn with the model's incremental sampler, plus ``samples.npz``.
"""

from __future__ import annotations

import functools
import json
import math
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from swarmlab import plots
from swarmlab.errors import SwarmlabError
from swarmlab.integrity import FILES_KEY, check_options, read_meta, record_files
from swarmlab.settings import setting
from tasks.base import Metrics, Task
from tasks.idx import load_mnist_like
from tasks.source_digests import check_source
from tasks.registry import register_task

N_VALUES = 256  # 8-bit sub-pixels
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class DatasetInfo:
    title: str
    class_names: tuple[str, ...]


DATASETS = {
    "mnist": DatasetInfo("MNIST", tuple(str(k) for k in range(10))),
    "fashion_mnist": DatasetInfo(
        "Fashion-MNIST",
        ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
    ),  # Xiao et al. 2017
}
APPROXIMATE_NOTE = "trained on MNIST's approximate training images"


@dataclass
class ImageOptions:
    dataset: str = "mnist"  # mnist | fashion_mnist: the idx folder under paths.datasets
    data_dir: str = ""  # the data stage's output, relative to the work folder; "" = data/<dataset>
    val_size: int = setting(5000, ge=1, le=10_000_000)  # validation images drawn from the official training split
    max_train: int = setting(0, ge=0, le=10_000_000)  # at most this many training images (after validation); 0 = all
    max_test: int = setting(0, ge=0, le=10_000_000)  # at most this many test images (a seeded subset); 0 = all
    # Seeds the validation draw and the max_* subsets. Apart from the run's seed on purpose: runs with
    # different seeds are then scored on the same validation images.
    split_seed: int = setting(0, ge=0)

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {self.dataset!r}")
        if self.val_size < 1:
            raise ValueError(f"val_size must be >= 1 (validation images drawn from train), got {self.val_size}")
        for name in ("max_train", "max_test", "split_seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no cap), got {getattr(self, name)}")


def split_indices(
    n_train: int, n_test: int, *, val_size: int, max_train: int, max_test: int, seed: int
) -> dict[str, np.ndarray]:
    """Rows of the official files per split: val = ``val_size`` of train drawn with ``seed``, train = the rest
    (its first ``max_train`` in that draw's order: a smaller cap keeps a subset of a larger one), test = all
    (or ``max_test`` of them). Each sorted, as in the source files."""
    if val_size >= n_train:
        raise ValueError(f"val_size={val_size} leaves no training images (the training split has {n_train})")
    order = np.random.default_rng([seed, 0]).permutation(n_train)
    val, train = order[:val_size], order[val_size:]
    if max_train:
        train = train[:max_train]
    test = np.arange(n_test)
    if max_test and max_test < n_test:
        test = np.random.default_rng([seed, 1]).permutation(n_test)[:max_test]
    return {"train": np.sort(train), "val": np.sort(val), "test": np.sort(test)}


class ImageSplit:
    """``images`` (N, C, H, W) uint8 and ``labels`` (N,) long, held as tensors.

    ``get_batch(idx)`` returns ``{"pixels": (B, C, H, W) long, "label": (B,) long}``.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        assert images.ndim == 4 and len(images) == len(labels), "inconsistent split arrays"
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def image_size(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])

    def to(self, device) -> "ImageSplit":
        """A copy on ``device`` (MNIST's 55,000 training images are 43 MB as uint8)."""
        return ImageSplit(self.images.to(device), self.labels.to(device))

    def get_batch(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        idx = idx.to(self.images.device, non_blocking=True)
        return {"pixels": self.images[idx].long(), "label": self.labels[idx]}


def read_split(
    folder: Path,
    split: str,
    *,
    image_size: tuple | None = None,
    num_classes: int | None = None,
    hint: str = "rerun the data stage",
) -> ImageSplit:
    """``<split>.npz`` as an ImageSplit, checked as it is read (one line naming the file): a readable npz holding
    ``images`` uint8 (N, C, H, W) of ``image_size`` and as many ``labels`` in ``0..num_classes-1``."""
    path = Path(folder) / f"{split}.npz"
    if not path.is_file():
        raise SwarmlabError(f"{path} is missing: run the data stage first (python -m pipelines.data --task <key>)")
    try:
        with np.load(path, allow_pickle=False) as f:
            images, labels = f["images"], f["labels"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SwarmlabError(f"cannot read {path}: {first}; the file is damaged: {hint}") from None
    if images.dtype != np.uint8 or images.ndim != 4:
        raise SwarmlabError(
            f"{path}: images are {images.dtype} of shape {images.shape}, expected uint8 (N, C, H, W) "
            f"(a channel axis too): {hint}"
        )
    if image_size is not None and tuple(images.shape[1:]) != tuple(image_size):
        raise SwarmlabError(
            f"{path}: images of {tuple(images.shape[1:])}, but meta.json records {tuple(image_size)}: {hint}"
        )
    if labels.ndim != 1 or len(labels) != len(images):
        raise SwarmlabError(f"{path}: {labels.shape} labels for {len(images)} images: {hint}")
    if num_classes is not None and len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        row = int(np.flatnonzero((labels.astype(np.int64) < 0) | (labels.astype(np.int64) >= num_classes))[0])
        raise SwarmlabError(f"{path} row {row}: label {int(labels[row])} outside 0..{num_classes - 1}: {hint}")
    return ImageSplit(torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)))


def nats_per_image(logits: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
    """(B,) fp32: each image's summed cross-entropy in nats, from logits (B, 256, C, H, W) and pixels (B, C, H, W)."""
    B = logits.shape[0]
    # The SWARM Transformer's logits are a (B, 256, C, H, W) view of (B, H, W, C, 256) memory: this permute
    # restores that layout (no copy) and puts the 256 values last, where log-softmax is ~2x faster on CPU.
    flat = logits.permute(0, 3, 4, 2, 1).reshape(-1, N_VALUES).float()  # (B*H*W*C, 256)
    targets = pixels.permute(0, 2, 3, 1).reshape(-1)  # (B*H*W*C,) in the same order
    return F.cross_entropy(flat, targets, reduction="none").view(B, -1).sum(dim=1)  # (B,)


class BitsPerDim(Metrics):
    """Nats per sub-pixel (``loss``) and ``bits_per_dim`` = loss / ln 2 over a pass, overall and per class.

    Sums each image's nats (``outputs["nats"]``) per class in float64 on the outputs' device; ``compute``
    divides by images x sub-pixels, so batches of any size weigh by their images.
    """

    def __init__(self, class_names: tuple[str, ...], approximate: bool = False):
        self.class_names, self.approximate = tuple(class_names), approximate
        self.nats: torch.Tensor | None = None  # (K,) float64 nats per class
        self.images: torch.Tensor | None = None  # (K,) float64 images per class
        self.dims = 0  # sub-pixels per image

    def update(self, outputs: dict, batch: dict, loss: torch.Tensor | None = None) -> None:
        nats = outputs["nats"].detach().double()  # (B,)
        labels = batch["label"].to(nats.device)
        if self.nats is None:
            K = len(self.class_names)
            self.nats, self.images = nats.new_zeros(K), nats.new_zeros(K)
        self.dims = math.prod(outputs["logits"].shape[2:])  # C*H*W, from the shape: no host sync
        self.nats.index_add_(0, labels, nats)
        self.images.index_add_(0, labels, torch.ones_like(nats))
        if self.keep_items:  # per image: nats per sub-pixel (the loss) and bits/dim
            per_dim = nats / self.dims
            self._keep("loss", per_dim)
            self._keep("bits_per_dim", per_dim / math.log(2))

    def compute(self) -> dict[str, float]:
        if self.nats is None:
            return {}
        nats, images = self.nats.sum().item(), self.images.sum().item()
        loss = nats / (images * self.dims)
        return {"loss": loss, "bits_per_dim": loss / math.log(2)}

    def per_class(self) -> dict[str, float]:
        """Bits/dim per class (classes without images left out)."""
        if self.nats is None:
            return {}
        bpd = (self.nats / (self.images.clamp(min=1) * self.dims * math.log(2))).tolist()
        counts = self.images.tolist()
        return {name: v for name, v, n in zip(self.class_names, bpd, counts) if n > 0}

    def extras(self) -> dict:
        return {"bits_per_dim_per_class": self.per_class(), "approximate_train_images": self.approximate}


@register_task
class ImageGenerationTask(Task):
    name = "image_generation"
    model_kind = "image"
    monitor = "bits_per_dim"
    mode = "min"
    item_name = "images"
    Options = ImageOptions

    @property
    def info(self) -> DatasetInfo:
        return DATASETS[self.options.dataset]

    @property
    def data_dir(self) -> Path:
        return self.path(self.options.data_dir or f"data/{self.options.dataset}")

    split_files = "{split}.npz"

    def data_inputs(self) -> list[str]:
        return [f"${{paths.datasets}}/{self.options.dataset}"]

    @property
    def rebuild_hint(self) -> str:
        return f"python -m pipelines.data --task {self.key} (dvc repro data@{self.key})"

    def _generation_options(self) -> dict:
        o = self.options
        return {
            "dataset": o.dataset,
            "val_size": o.val_size,
            "max_train": o.max_train,
            "max_test": o.max_test,
            "split_seed": o.split_seed,
        }

    @functools.cached_property
    def meta(self) -> dict:
        """``meta.json``, checked: JSON, built with the options in force, with the facts the loaders use."""
        path = self.data_dir / "meta.json"
        meta = read_meta(path, self.rebuild_hint)
        check_options(meta, path, self._generation_options(), f"tasks.{self.key}.options", self.rebuild_hint)
        size, classes = meta.get("image_size"), meta.get("num_classes")
        if not (
            isinstance(size, list) and len(size) == 3 and all(isinstance(v, int) and v > 0 for v in size)
        ) or classes != len(self.info.class_names):
            raise SwarmlabError(
                f"{path}: image_size {size!r} / num_classes {classes!r} are not those of "
                f"{self.options.dataset}: rebuild the data: {self.rebuild_hint}"
            )
        return meta

    @property
    def approximate(self) -> bool:
        return bool(self.meta["approximate_train_images"])

    # data ------------------------------------------------------------------------------------------
    def build_data(self, out_dir: Path, *, datasets: Path, seed: int) -> dict:
        """Convert ``<datasets>/<dataset>``'s idx files into the npz splits (see the module docstring).

        ``seed`` (the run's) is not used: the splits follow the ``split_seed`` option."""
        o = self.options
        folder = Path(datasets) / o.dataset
        if not folder.is_dir():
            raise SwarmlabError(
                f"{folder} does not exist: point paths.datasets (or $SWARMLAB_DATASETS) at the folder "
                f"holding {o.dataset}/ with the idx files"
            )
        train, test = load_mnist_like(folder, "train"), load_mnist_like(folder, "test")
        known = {  # before anything is built: another dataset's (or another role's) files are refused
            f"{prefix}-{kind}": check_source(o.dataset, f"{prefix}-{kind}", getattr(src, f"{kind}_path"), md5)
            for prefix, src in (("train", train), ("t10k", test))
            for kind, md5 in (("images", src.images_md5), ("labels", src.labels_md5))
        }
        try:
            rows = split_indices(
                len(train.labels),
                len(test.labels),
                val_size=o.val_size,
                max_train=o.max_train,
                max_test=o.max_test,
                seed=o.split_seed,
            )
        except ValueError as exc:
            raise SwarmlabError(f"tasks.{self.key}.options: {exc}") from None
        classes = len(self.info.class_names)
        for src in (train, test):
            if len(src.labels) and int(src.labels.max()) >= classes:
                raise SwarmlabError(
                    f"{src.labels_path}: labels up to {int(src.labels.max())}, but {o.dataset} has {classes} classes"
                )
        sources = {"train": train, "val": train, "test": test}
        for split, idx in rows.items():
            src = sources[split]
            np.savez(
                out_dir / f"{split}.npz",
                images=src.images[idx][:, None],
                labels=src.labels[idx],
                index=idx.astype(np.int32),
            )
        # A 256-way model puts next to no mass on values it never saw in training, so each test pixel with such a
        # value costs many bits: MNIST's approximate training images lack 29 values (1, 3, 6, 8, ...) that make up
        # 1.4% of the test pixels. Said here, so that a train/test gap in bits/dim can be traced to the data.
        seen = np.bincount(train.images[rows["train"]].ravel(), minlength=N_VALUES) > 0
        test_counts = np.bincount(test.images[rows["test"]].ravel(), minlength=N_VALUES)
        unseen = np.flatnonzero(~seen & (test_counts > 0))
        meta = {
            "dataset": o.dataset,
            "title": self.info.title,
            "image_size": [1, *train.images.shape[1:]],  # (C, H, W)
            "num_classes": classes,
            "class_names": list(self.info.class_names),
            "rows": {split: int(len(idx)) for split, idx in rows.items()},
            "approximate_train_images": bool(train.approximate),  # val comes from train: approximate too
            "approximate_test_images": bool(test.approximate),
            "sources": {
                "train_images": train.images_path.name,
                "train_labels": train.labels_path.name,
                "test_images": test.images_path.name,
                "test_labels": test.labels_path.name,
            },
            "source_md5": {  # of the decompressed files; known: the digest tasks/source_digests.py knows for it
                "train_images": train.images_md5,
                "train_labels": train.labels_md5,
                "test_images": test.images_md5,
                "test_labels": test.labels_md5,
            },
            "sources_known": all(known.values()),
            "val_size": o.val_size,
            "max_train": o.max_train,
            "max_test": o.max_test,
            "split_seed": o.split_seed,
            "test_values_unseen_in_train": unseen.tolist(),
            "test_pixels_unseen_in_train": float(test_counts[unseen].sum() / max(test_counts.sum(), 1)),
            "options": self._generation_options(),
            FILES_KEY: record_files(out_dir, {split: [f"{split}.npz"] for split in SPLITS}),
        }
        (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        summary = {
            "dataset": o.dataset,
            **{f"{s}_rows": n for s, n in meta["rows"].items()},
            "image_size": "x".join(map(str, meta["image_size"])),
            "approximate_train_images": meta["approximate_train_images"],
            "sources_known": meta["sources_known"],
            "test_values_unseen_in_train": len(unseen),
            "test_pixels_unseen_in_train": round(meta["test_pixels_unseen_in_train"], 5),
        }
        if not meta["sources_known"]:
            summary["unknown_sources"] = sorted(role for role, ok in known.items() if not ok)
        if train.approximate:
            summary["note"] = (
                "the train and val images are MNIST's approximate training images (97.2% of pixels "
                "exact, the rest off by at most 1/255); test is exact"
            )
        return summary

    def model_kwargs(self) -> dict:
        return {"image_size": tuple(self.meta["image_size"]), "num_classes": self.meta["num_classes"]}

    def _split(self, split: str, model_cfg) -> ImageSplit:
        self.check_data((split,))  # meta.json first, then the file against its recorded size and hash
        data = read_split(
            self.data_dir,
            split,
            image_size=self.meta["image_size"],
            num_classes=self.meta["num_classes"],
            hint=f"rebuild the data: {self.rebuild_hint}",
        )
        want = getattr(model_cfg, "image_size", None)
        if want is not None and tuple(want) != data.image_size:
            raise SwarmlabError(
                f"the model takes {tuple(want)} images but {self.data_dir} holds {data.image_size}: "
                f"drop image_size from tasks.{self.key}.model_overrides"
            )
        return data

    def split_items(self, split: str, folder: Path | None = None) -> dict[Path, list[bytes]]:
        """Each row's image, by content (its bytes): MNIST's and Fashion-MNIST's train and test files share none."""
        folder = Path(folder or self.data_dir)
        path = folder / f"{split}.npz"
        images = read_split(folder, split, hint=f"rebuild the data: {self.rebuild_hint}").images.numpy()
        return {path: [row.tobytes() for row in images.reshape(len(images), -1)]}

    def train_data(self, model_cfg) -> ImageSplit:
        return self._split("train", model_cfg)

    def eval_data(self, split: str, model_cfg) -> ImageSplit:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        return self._split(split, model_cfg)

    def describe_data(self, train, val) -> dict:
        return {
            "train_rows": len(train),
            "val_rows": len(val),
            "dataset": self.options.dataset,
            "image_size": "x".join(map(str, train.image_size)),
            "approximate_train_images": self.approximate,
        }

    # compute ---------------------------------------------------------------------------------------
    def forward(self, model: nn.Module, batch: dict) -> dict:
        logits = model(batch["pixels"], batch["label"])  # (B, 256, C, H, W)
        return {"logits": logits, "nats": nats_per_image(logits, batch["pixels"])}

    def loss(self, outputs: dict, batch: dict) -> torch.Tensor:
        """Mean cross-entropy per sub-pixel in nats (fp32)."""
        return outputs["nats"].mean() / math.prod(outputs["logits"].shape[2:])

    # scores ----------------------------------------------------------------------------------------
    def new_metrics(self) -> BitsPerDim:
        return BitsPerDim(self.info.class_names, approximate=self.approximate)

    def title(self, text: str) -> str:
        """``<dataset>: text``, with the approximate-images note for MNIST."""
        return f"{self.info.title}: {text}" + (f"\n({APPROXIMATE_NOTE})" if self.approximate else "")

    def report(self, meter: BitsPerDim, out_dir: Path, *, title: str = "", name: str = "") -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        per_class = meter.per_class()
        if not per_class:
            return []
        total = meter.compute()["bits_per_dim"]
        path = out_dir / f"bits_per_class_{name or self.key}.png"
        head = f"{title}: " if title else ""
        return [
            plots.class_scores(
                list(per_class.values()),
                list(per_class),
                path,
                self.title(f"{head}test bits/dim per class (all: {total:.4f})"),
                "bits/dim",
            )
        ]

    # samples ---------------------------------------------------------------------------------------
    def check_sample_count(self, num_samples: int) -> None:
        """One row per class of ``num_samples // classes``: a count that is not a whole number of rows would
        draw another number than the one asked for."""
        K = self.meta["num_classes"]
        if num_samples < K or num_samples % K:
            near = max(K, round(num_samples / K) * K)
            raise SwarmlabError(
                f"sample.num_samples is {num_samples}, but {self.key} draws one row per class of {K} classes: use a "
                f"multiple of {K} (e.g. {near})"
            )

    def sample(
        self,
        model: nn.Module,
        out_dir: Path,
        *,
        num_samples: int,
        temperature: float,
        seed: int,
        device: torch.device,
        name: str = "",
    ) -> dict:
        """``num_samples // classes`` (at least 1) samples per class with the model's incremental sampler, in
        one batch: ``samples.png`` (one row per class) and ``samples.npz`` (``images`` (N, C, H, W) uint8,
        ``labels`` (N,), class-major)."""
        if not callable(getattr(model, "sample", None)):
            raise SwarmlabError(
                f"model {name or type(model).__name__} has no sample(labels, *, generator, temperature) "
                f"method: image generation samples need one"
            )
        K = self.meta["num_classes"]
        per_class = max(1, num_samples // K)
        labels = torch.arange(K, device=device).repeat_interleave(per_class)  # (K*n,) class-major
        generator = torch.Generator(device=device).manual_seed(seed)
        t0 = time.perf_counter()
        images = model.sample(labels, generator=generator, temperature=temperature)  # (K*n, C, H, W) long
        drawn = images.to(torch.uint8).cpu().numpy()  # the copy waits for the device
        seconds = time.perf_counter() - t0
        labels_np = labels.cpu().numpy().astype(np.uint8)
        np.savez(out_dir / "samples.npz", images=drawn, labels=labels_np, seed=seed, temperature=temperature)
        C, H, W = drawn.shape[1:]
        what = f"class-conditional samples of {name or 'the model'}, seed {seed}" + (
            f", temperature {temperature:g}" if temperature != 1.0 else ""
        )
        plots.image_grid(
            drawn.reshape(K, per_class, C, H, W),
            out_dir / "samples.png",
            self.title(what),
            row_labels=self.meta["class_names"],
        )
        mean = drawn.reshape(K, per_class, -1).mean(axis=(1, 2))
        return {
            "samples": int(len(drawn)),
            "per_class": per_class,
            "classes": K,
            "seed": seed,
            "temperature": temperature,
            "sampler": "incremental",
            "sample_seconds": round(seconds, 3),
            "mean_pixel_per_class": {c: round(float(m), 2) for c, m in zip(self.meta["class_names"], mean)},
            "approximate_train_images": self.approximate,
            "files": ["samples.png", "samples.npz"],
        }
