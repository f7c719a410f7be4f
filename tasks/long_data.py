"""Long-sequence data as pure functions: byte-level text (LRA "Text"), ListOps (LRA), arXiv-11 (He et al., 2019).

No task classes and no pipeline code here: the task contract and the DVC stages wire these in.

Ids shared by the byte and ListOps vocabularies (True = real token in every mask built from ``lengths``):

    PAD = 0    padding, never a real token
    CLS = 1    optional first token (``add_special=True``), e.g. Longformer's global token
    SEP = 2    optional last token (``add_special=True``)

Byte-level text: id = byte + NUM_SPECIAL (3), so ``BYTE_VOCAB_SIZE = 259`` (``models.hsw``'s default
vocab_size). LRA feeds the raw bytes of an IMDB review truncated to 4000; the default here is 4096 (HSW's
length, a multiple of its windows), and nothing is added unless ``add_special``.

ListOps: LRA's generator (google-research/long-range-arena ``lra_benchmarks/data/listops.py``): nested
``[MAX``, ``[MIN``, ``[MED``, ``[SM`` (sum mod 10) over the digits 0-9, written as space-separated tokens,
``[MAX 4 3 [MIN 2 3 ] 1 0 ]``; the label is the value, 10 classes. See :func:`generate_listops` for the
distribution. Vocabulary: the specials, the 10 digits, the 4 operators and ``]`` (18 ids, ``LISTOPS_VOCAB``).

arXiv-11: the 11 categories of He et al. (2019), either their folder layout (one folder of ``.txt`` per
category) or JSONL splits; see :func:`load_arxiv11`. Malformed input raises :class:`LongDataError` with a
one-line message naming the file (and line).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from swarmlab.errors import SwarmlabError

PAD, CLS, SEP = 0, 1, 2
NUM_SPECIAL = 3
BYTE_VOCAB_SIZE = 256 + NUM_SPECIAL  # 259
LRA_TEXT_LEN = 4096  # LRA uses 4000; 4096 is a multiple of HSW's windows and merges


class LongDataError(SwarmlabError, ValueError):
    """Malformed long-sequence input; the message is one line naming the file (and line) and the problem.

    A :class:`~swarmlab.errors.SwarmlabError`, so a stage reports it as one line (exit 2, no traceback); still a
    ``ValueError`` for callers that catch bad values."""


# ---- byte-level text (LRA "Text") ------------------------------------------------------------------------


def encode_bytes(
    texts: Iterable[str | bytes], max_len: int = LRA_TEXT_LEN, *, add_special: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of each text as ids ``byte + NUM_SPECIAL``, truncated to ``max_len`` and right-padded with PAD.

    Args:
        texts: strings (encoded as UTF-8) or bytes (taken as they are).
        max_len: columns L of the result; longer texts are cut (possibly inside a multi-byte character).
        add_special: ``[CLS] bytes [SEP]``, the bytes cut to ``max_len - 2`` (LRA adds nothing).
    Returns:
        ids (N, L) uint16 and lengths (N,) int64 (real tokens per row; row i is real on ``[0, lengths[i])``).
    """
    if max_len < (3 if add_special else 1):
        raise ValueError(f"max_len must be >= {3 if add_special else 1}, got {max_len}")
    rows = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    ids = np.full((len(rows), max_len), PAD, dtype=np.uint16)
    lengths = np.zeros(len(rows), dtype=np.int64)
    room = max_len - 2 if add_special else max_len
    for i, raw in enumerate(rows):
        body = np.frombuffer(raw[:room], dtype=np.uint8).astype(np.uint16) + NUM_SPECIAL
        if add_special:
            ids[i, 0] = CLS
            ids[i, 1 : 1 + len(body)] = body
            ids[i, 1 + len(body)] = SEP
            lengths[i] = len(body) + 2
        else:
            ids[i, : len(body)] = body
            lengths[i] = len(body)
    return ids, lengths


def decode_bytes(ids: Sequence[int]) -> bytes:
    """The bytes of one row of :func:`encode_bytes` (specials dropped)."""
    return bytes(int(i) - NUM_SPECIAL for i in ids if int(i) >= NUM_SPECIAL)


# ---- ListOps (LRA) ----------------------------------------------------------------------------------------

LISTOPS_OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")  # SM = sum modulo 10
LISTOPS_END = "]"
LISTOPS_VOCAB = ("<pad>", "<cls>", "<sep>", *(str(d) for d in range(10)), *LISTOPS_OPERATORS, LISTOPS_END)
LISTOPS_IDS = {token: i for i, token in enumerate(LISTOPS_VOCAB)}
LISTOPS_NUM_CLASSES = 10


def _apply(op: str, values: list[int]) -> int:
    """The generator's own semantics (LRA ``to_value``): MED is ``int(np.median)``, the mean of the two middle
    values truncated for an even count."""
    if op == "[MAX":
        return max(values)
    if op == "[MIN":
        return min(values)
    if op == "[SM":
        return sum(values) % 10
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2


def _generate_tree(
    rng: random.Random, depth: int, max_depth: int, max_args: int, value_p: float, out: list[str]
) -> int:
    """Append one random (sub)expression's tokens to ``out`` and return its value (LRA ``generate_tree``).

    Below ``max_depth`` a node is an operator with probability ``value_p`` (else a digit); at ``max_depth``
    always a digit. An operator gets 2..max_args children (uniform) and a uniform operator.
    """
    r = rng.random() if depth < max_depth else 1.0
    if r > value_p:
        value = rng.choice(range(10))
        out.append(str(value))
        return value
    num_values = rng.randint(2, max_args)
    op_at = len(out)
    out.append("")  # the operator is drawn after its children, as LRA does
    values = [_generate_tree(rng, depth + 1, max_depth, max_args, value_p, out) for _ in range(num_values)]
    op = rng.choice(LISTOPS_OPERATORS)
    out[op_at] = op
    out.append(LISTOPS_END)
    return _apply(op, values)


class _TooLong(Exception):
    """A pilot draw passed its token cap (see ``listops_acceptance``)."""


def _capped_tree(
    rng: random.Random, depth: int, max_depth: int, max_args: int, value_p: float, out: list[str], cap: int
) -> None:
    """``_generate_tree``'s distribution without the values, abandoned (``_TooLong``) once ``cap`` tokens are out."""
    r = rng.random() if depth < max_depth else 1.0
    if r > value_p:
        rng.choice(range(10))
        out.append("")
    else:
        num_values = rng.randint(2, max_args)
        out.append("")
        for _ in range(num_values):
            _capped_tree(rng, depth + 1, max_depth, max_args, value_p, out, cap)
        rng.choice(LISTOPS_OPERATORS)
        out.append("")
    if len(out) >= cap:
        raise _TooLong


def listops_expected_tokens(max_depth: int, max_args: int, value_p: float = 0.25) -> float:
    """The mean token count of one drawn tree (before the length filter): E(max_depth) = 1 and, above,
    E(d) = (1 - p) + p (2 + (2 + max_args) / 2 * E(d + 1)). Each draw builds its whole tree before the length
    check, so this is the cost of one try: LRA's defaults give ~133 tokens; max_args=1000 gives ~1e19."""
    e = 1.0
    for _ in range(max_depth - 1):
        e = (1 - value_p) + value_p * (2 + (2 + max_args) / 2 * e)
    return e


MAX_TOKENS_PER_DRAW = 1_000_000  # ~1.3 s of Python per draw on these CPUs: beyond it a build cannot finish


def listops_acceptance(
    *,
    max_depth: int,
    max_args: int,
    min_length: int,
    max_length: int,
    value_p: float = 0.25,
    draws: int = 2000,
    seconds: float = 2.0,
    seed: int = 12345,
) -> tuple[int, int]:
    """(accepted, drawn): a pilot of at most ``draws`` trees (at most ``seconds``) from a generator of its own, each
    abandoned once it passes ``max_length`` tokens (rejected either way), so the pilot costs at most
    draws x max_length tokens. It estimates the share of tries ``generate_listops`` keeps."""

    rng, accepted, t0 = random.Random(seed), 0, time.monotonic()
    for drawn in range(1, draws + 1):  # noqa: B007 (returned: how many were drawn before the deadline)
        out: list[str] = []
        try:
            _capped_tree(rng, 1, max_depth, max_args, value_p, out, max_length)
            accepted += min_length < len(out) < max_length
        except _TooLong:
            pass
        if time.monotonic() - t0 > seconds:
            break
    return accepted, drawn


def check_listops_feasible(
    n: int,
    *,
    max_depth: int,
    max_args: int,
    min_length: int,
    max_length: int,
    value_p: float = 0.25,
    max_tries: int | None = None,
) -> float:
    """Refuse, before any drawing, settings ``generate_listops`` cannot meet in its bounded number of tries, or whose
    every try builds a huge tree; returns the estimated share of tries kept."""
    per_draw = listops_expected_tokens(max_depth, max_args, value_p)
    if per_draw > MAX_TOKENS_PER_DRAW:
        raise LongDataError(
            f"ListOps with max_depth={max_depth} and max_args={max_args}: a drawn tree has ~{per_draw:.3g} "
            f"tokens on average (LRA's 10 and 10: ~133) before the length check, so the build could not "
            f"finish: lower max_args or max_depth"
        )
    limit = max_tries if max_tries is not None else 1000 * n + 10000
    accepted, drawn = listops_acceptance(
        max_depth=max_depth, max_args=max_args, min_length=min_length, max_length=max_length, value_p=value_p
    )
    share = accepted / drawn if accepted else 1.0 / drawn  # none kept: at best about one in `drawn`
    if n / share > limit:
        raise LongDataError(
            f"ListOps with {min_length} < tokens < {max_length}, max_depth={max_depth}, max_args={max_args}: "
            f"{accepted} of {drawn} trial draws were kept, so {n:,} expressions would take ~{n / share:,.0f} "
            f"tries, more than the {limit:,} allowed: widen the length range or change max_depth / max_args"
        )
    seconds = n / share * per_draw * SECONDS_PER_TOKEN
    if seconds > MAX_BUILD_SECONDS:
        raise LongDataError(
            f"ListOps: {n:,} expressions with max_depth={max_depth}, max_args={max_args} and "
            f"{min_length} < tokens < {max_length} would take ~{seconds / 3600:.0f} h to draw (~{n / share:,.0f} "
            f"tries of ~{per_draw:,.0f} tokens): lower the row counts, max_args or max_depth"
        )
    return share


SECONDS_PER_TOKEN = 1.3e-6  # measured: the pure-Python generator on these CPUs
MAX_BUILD_SECONDS = 6 * 3600  # a data build estimated beyond this is refused before it starts


def generate_listops(
    n: int,
    *,
    seed: int,
    max_depth: int = 10,
    max_args: int = 10,
    min_length: int = 500,
    max_length: int = 2000,
    value_p: float = 0.25,
    unique: bool = True,
    max_tries: int | None = None,
    progress=None,
) -> tuple[list[str], np.ndarray]:
    """``n`` random ListOps expressions and their values, LRA's distribution and defaults.

    A tree is drawn top-down from the root at depth 1 (see ``_generate_tree``: operator with probability
    ``value_p`` = 0.25 below ``max_depth``, 2..``max_args`` = 10 arguments) and kept when
    ``min_length < tokens < max_length`` (LRA: 500 < tokens < 2000); LRA keeps distinct trees only
    (``unique``). So brackets nest at most ``max_depth - 1`` deep (leaves may sit at depth ``max_depth``) and an
    expression has at most ``max_length - 1`` tokens. Unlike LRA's released files, the output has no ``(``/``)``
    tokens, the format of the LRA paper: ``[MAX 4 3 [MIN 2 3 ] 1 0 ]``.

    Args:
        n: expressions to return.
        seed: seeds a private ``random.Random``; the same arguments give the same data on every platform.
        max_tries: give up (LongDataError) after this many drawn trees (default ``1000 * n + 10000``).
        progress: called as ``progress(kept, tries)`` after every try (a ``swarmlab.heartbeat.Heartbeat``).
    Returns:
        (texts, labels): n space-separated token strings and (n,) int64 values in 0..9.
    """
    if not (max_depth >= 1 and max_args >= 2 and 0 <= min_length < max_length and 0.0 <= value_p <= 1.0):
        raise ValueError("need max_depth >= 1, max_args >= 2, 0 <= min_length < max_length, 0 <= value_p <= 1")
    rng = random.Random(seed)
    texts: list[str] = []
    labels: list[int] = []
    seen: set[str] = set()
    limit = max_tries if max_tries is not None else 1000 * n + 10000
    for tries in range(limit):
        if len(texts) == n:
            break
        if progress:
            progress(len(texts), tries)
        tokens: list[str] = []
        value = _generate_tree(rng, 1, max_depth, max_args, value_p, tokens)
        if not min_length < len(tokens) < max_length:
            continue
        text = " ".join(tokens)
        if unique:
            if text in seen:
                continue
            seen.add(text)
        texts.append(text)
        labels.append(value)
    if len(texts) < n:
        raise LongDataError(
            f"generate_listops: only {len(texts)} of {n} expressions in {limit} tries with "
            f"{min_length} < tokens < {max_length}: widen the length range or raise max_tries"
        )
    return texts, np.asarray(labels, dtype=np.int64)


def tokenize_listops(
    texts: Iterable[str], max_len: int = 2048, *, add_special: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Space-separated ListOps strings -> ids (N, max_len) uint16 (``LISTOPS_IDS``, PAD-padded) and lengths (N,).

    An expression longer than ``max_len`` (with ``[CLS] ... [SEP]`` if ``add_special``) is an error, not cut:
    a truncated expression has no value. An unknown token is an error naming it.
    """
    rows = []
    for i, text in enumerate(texts):
        tokens = text.split()
        try:
            row = [LISTOPS_IDS[t] for t in tokens]
        except KeyError as exc:
            raise LongDataError(
                f"ListOps expression {i}: unknown token {exc.args[0]!r}; known: {' '.join(LISTOPS_VOCAB[NUM_SPECIAL:])}"
            ) from None
        if add_special:
            row = [CLS, *row, SEP]
        if len(row) > max_len:
            raise LongDataError(f"ListOps expression {i} has {len(row)} tokens > max_len={max_len}: raise max_len")
        rows.append(row)
    ids = np.full((len(rows), max_len), PAD, dtype=np.uint16)
    lengths = np.zeros(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        lengths[i] = len(row)
    return ids, lengths


def listops_depth(text: str) -> int:
    """Tree depth of an expression in LRA's count: the root is depth 1, an operator's arguments one level deeper."""
    depth = best = 1  # depth = the level of the next node
    for token in text.split():
        if token in LISTOPS_OPERATORS:
            best = max(best, depth + 1)
            depth += 1
        elif token == LISTOPS_END:
            depth -= 1
    return best


_EVAL = {"[MAX": max, "[MIN": min, "[MED": lambda v: int(statistics.median(v)), "[SM": lambda v: sum(v) % 10}


def evaluate_listops(text: str) -> int:
    """The value of a space-separated ListOps expression, by recursive descent over its tokens.

    Independent of the generator (which computes values while drawing the tree): the test checks one against
    the other. MED is ``int(statistics.median)``, as LRA's ``int(np.median)``. A malformed expression is a
    :class:`LongDataError` saying where.
    """
    tokens = text.split()
    pos = 0

    def parse() -> int:
        nonlocal pos
        if pos >= len(tokens):
            raise LongDataError(f"ListOps: expression ends early after {pos} tokens")
        token = tokens[pos]
        pos += 1
        if len(token) == 1 and token.isdigit():
            return int(token)
        if token not in _EVAL:
            raise LongDataError(f"ListOps: unexpected token {token!r} at position {pos - 1}")
        args = []
        while pos < len(tokens) and tokens[pos] != LISTOPS_END:
            args.append(parse())
        if pos >= len(tokens):
            raise LongDataError(f"ListOps: {token} is never closed by ']'")
        pos += 1  # the ']'
        if not args:
            raise LongDataError(f"ListOps: {token} at position {pos - 2 - len(args)} has no arguments")
        return _EVAL[token](args)

    value = parse()
    if pos != len(tokens):
        raise LongDataError(f"ListOps: {len(tokens) - pos} tokens after the end of the expression")
    return value


# ---- arXiv-11 (He et al., 2019) ---------------------------------------------------------------------------

ARXIV11_CATEGORIES = (
    "cs.AI",
    "cs.CE",
    "cs.CV",
    "cs.DS",
    "cs.IT",
    "cs.NE",
    "cs.PL",
    "cs.SY",
    "math.AC",
    "math.GR",
    "math.ST",
)  # label = index here (sorted, as in He et al.'s table)
_CATEGORY_INDEX = {name.lower(): i for i, name in enumerate(ARXIV11_CATEGORIES)}  # folders may be "cs.cv"
ARXIV11_SPLIT_FILES = {"train": "train.jsonl", "val": "val.jsonl", "test": "test.jsonl"}


@dataclass
class TextSplit:
    """Raw documents and integer labels (index into ``ARXIV11_CATEGORIES``)."""

    texts: list[str]
    labels: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return len(self.texts)


def _label(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise LongDataError(f"{where}: label must be an int 0..10 or a category name, got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < len(ARXIV11_CATEGORIES):
            raise LongDataError(f"{where}: label {value} is out of range 0..{len(ARXIV11_CATEGORIES) - 1}")
        return value
    if value.lower() not in _CATEGORY_INDEX:
        raise LongDataError(f"{where}: unknown category {value!r}; expected one of {', '.join(ARXIV11_CATEGORIES)}")
    return _CATEGORY_INDEX[value.lower()]


def load_jsonl_split(path: str | Path) -> TextSplit:
    """One JSONL file: a JSON object ``{"text": str, "label": int | category name}`` per line (other keys are
    ignored, blank lines skipped). A malformed line is a :class:`LongDataError` naming ``path:line``."""
    path = Path(path)
    texts, labels = [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LongDataError(f"{path}: cannot read ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LongDataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict) or "text" not in row or "label" not in row:
            raise LongDataError(f'{where}: expected an object with "text" and "label", got {line[:60]!r}')
        if not isinstance(row["text"], str) or not row["text"].strip():
            raise LongDataError(f'{where}: "text" must be a non-empty string')
        texts.append(row["text"])
        labels.append(_label(row["label"], where))
    if not texts:
        raise LongDataError(f"{path}: no documents")
    return TextSplit(texts, np.asarray(labels, dtype=np.int64))


def load_arxiv11_folders(root: str | Path, *, encoding_errors: str = "strict") -> TextSplit:
    """He et al.'s layout: ``root/<category>/*.txt`` for the 11 categories (folder names case-insensitive, e.g.
    the released ``cs.cv``); documents in sorted file order per category, categories in label order.

    Files not ending in ``.txt`` and hidden entries are ignored. A missing or unknown category folder, an empty
    category, an unreadable, undecodable (UTF-8, ``encoding_errors``) or empty document is a
    :class:`LongDataError` naming it.
    """
    root = Path(root)
    if not root.is_dir():
        raise LongDataError(f"{root}: not a folder (expected one folder of .txt files per arXiv-11 category)")
    folders = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        if entry.name.lower() not in _CATEGORY_INDEX:
            raise LongDataError(
                f"{entry}: unknown category folder; expected the 11 of He et al. 2019: {', '.join(ARXIV11_CATEGORIES)}"
            )
        label = _CATEGORY_INDEX[entry.name.lower()]
        if label in folders:
            raise LongDataError(f"{entry}: category {ARXIV11_CATEGORIES[label]} appears twice ({folders[label].name})")
        folders[label] = entry
    missing = [ARXIV11_CATEGORIES[i] for i in range(len(ARXIV11_CATEGORIES)) if i not in folders]
    if missing:
        raise LongDataError(f"{root}: missing category folder(s) {', '.join(missing)}")
    texts, labels = [], []
    for label in sorted(folders):
        files = sorted(
            p for p in folders[label].iterdir() if p.is_file() and p.suffix == ".txt" and not p.name.startswith(".")
        )
        if not files:
            raise LongDataError(f"{folders[label]}: no .txt documents")
        for path in files:
            try:
                text = path.read_bytes().decode("utf-8", errors=encoding_errors)
            except OSError as exc:
                raise LongDataError(f"{path}: cannot read ({exc.strerror})") from None
            except UnicodeDecodeError as exc:
                raise LongDataError(
                    f"{path}: not UTF-8 at byte {exc.start} (pass encoding_errors='replace' to substitute)"
                ) from None
            if not text.strip():
                raise LongDataError(f"{path}: empty document")
            texts.append(text)
            labels.append(label)
    return TextSplit(texts, np.asarray(labels, dtype=np.int64))


def stratified_split(
    labels: np.ndarray, *, val_fraction: float, test_fraction: float, seed: int
) -> dict[str, np.ndarray]:
    """Indices of train / val / test, the same fractions of every class (rounded down for val and test),
    shuffled per class with ``np.random.default_rng(seed)``; each index array sorted."""
    if not (0 <= val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
        raise ValueError("need val_fraction, test_fraction >= 0 with a sum < 1")
    rng = np.random.default_rng(seed)
    out = {"train": [], "val": [], "test": []}
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val, n_test = int(len(idx) * val_fraction), int(len(idx) * test_fraction)
        out["val"].append(idx[:n_val])
        out["test"].append(idx[n_val : n_val + n_test])
        out["train"].append(idx[n_val + n_test :])
    return {k: np.sort(np.concatenate(v)) if v else np.zeros(0, dtype=np.int64) for k, v in out.items()}


def load_arxiv11(
    root: str | Path,
    *,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    encoding_errors: str = "strict",
) -> dict[str, TextSplit]:
    """arXiv-11 as ``{"train", "val", "test"} -> TextSplit`` from either layout:

    * JSONL: ``root/train.jsonl``, ``root/test.jsonl`` and (optional) ``root/val.jsonl``, one
      ``{"text", "label"}`` object per line (:func:`load_jsonl_split`); the splits are used as given, and
      without ``val.jsonl`` the result has no "val";
    * folders (He et al. 2019): ``root/<category>/*.txt`` (:func:`load_arxiv11_folders`), which has no
      splits: :func:`stratified_split` with ``val_fraction``, ``test_fraction`` and ``seed`` makes them.

    The JSONL layout is used when ``root/train.jsonl`` exists.
    """
    root = Path(root)
    if (root / ARXIV11_SPLIT_FILES["train"]).is_file():
        if not (root / ARXIV11_SPLIT_FILES["test"]).is_file():
            raise LongDataError(
                f"{root}: train.jsonl without test.jsonl; the JSONL layout needs both (val.jsonl optional)"
            )
        return {
            split: load_jsonl_split(root / name)
            for split, name in ARXIV11_SPLIT_FILES.items()
            if (root / name).is_file()
        }
    pool = load_arxiv11_folders(root, encoding_errors=encoding_errors)
    parts = stratified_split(pool.labels, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed)
    return {split: TextSplit([pool.texts[i] for i in idx], pool.labels[idx]) for split, idx in parts.items()}
