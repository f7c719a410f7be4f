"""NLTK data from the shipped folder, never a download: WordNet 3.0 and the Punkt English model.

``import nltk`` costs 1.6-4 s (it imports scipy.stats), so it happens here, inside the augmentation
code only, never at the top level of a stage module.
"""

from __future__ import annotations

from pathlib import Path

from swarmlab.errors import SwarmlabError

# What the augmentation reads, relative to the nltk_data folder.
REQUIRED = ("corpora/wordnet.zip", "tokenizers/punkt_tab/english")


def load_nltk(nltk_dir: Path):
    """``(wordnet, punkt)`` read from ``nltk_dir`` only; a SwarmlabError names the folder when data is missing.

    ``nltk_dir`` is put first on ``nltk.data.path`` (not replacing it, so a user's own NLTK_DATA still works
    for other tools); the files are checked first, so NLTK never gets to suggest ``nltk.download``.
    """
    nltk_dir = Path(nltk_dir)
    missing = [rel for rel in REQUIRED if not (nltk_dir / rel).exists()]
    if missing:
        raise SwarmlabError(
            f"NLTK data folder {nltk_dir} lacks {', '.join(missing)}: point paths.datasets (or SWARMLAB_DATASETS) "
            f"at the folder holding nltk_data/ with WordNet 3.0 (corpora/wordnet.zip) and Punkt (tokenizers/punkt_tab); "
            f"the pipeline never downloads"
        )
    import nltk  # slow import: only here

    if str(nltk_dir) not in nltk.data.path:
        nltk.data.path.insert(0, str(nltk_dir))
    from nltk.corpus import wordnet  # nltk: heavy, and only the augmentation needs it
    from nltk.tokenize import PunktTokenizer

    try:
        wordnet.ensure_loaded()
        punkt = PunktTokenizer("english")
    except (LookupError, OSError) as exc:
        raise SwarmlabError(f"cannot read NLTK data in {nltk_dir}: {str(exc).strip().splitlines()[0]}") from None
    return wordnet, punkt


def sense_counts(wn) -> dict[str, int]:
    """Sense key -> SemCor tag count from WordNet's ``cntlist.rev`` (read once, whole).

    ``Lemma.count()`` binary-searches that file inside the zip on every call (~25 ms a word here), far too slow
    for tens of thousands of word types.
    """
    counts = {}
    with wn.open("cntlist.rev") as f:
        for line in f:
            key, _sense_number, count = line.split()
            counts[key] = int(count)
    return counts
