"""Text augmentation for IMDB: sentence shuffle, guarded WordNet synonyms, hierarchical (combo) samples.

NLTK is imported lazily (``load_resources``); importing this package is cheap.
"""

from __future__ import annotations

from pathlib import Path

from tasks.augmentation.lexicon import Lexicon, build_opinion_lexicon, is_skipped
from tasks.augmentation.resources import load_nltk, sense_counts
from tasks.augmentation.strategies import (
    CONNECTIVES,
    combine_reviews,
    replace_synonyms,
    sentiment_events,
    sentiment_flipped,
    shuffle_sentences,
    split_sentences,
)


def load_resources(nltk_dir: Path, *, senses: int = 3, sense_share: float = 0.5) -> tuple[Lexicon, object]:
    """``(lexicon, punkt)`` from the shipped NLTK data in ``nltk_dir`` (never downloaded)."""
    wn, punkt = load_nltk(nltk_dir)
    return Lexicon(wn, sense_counts(wn), senses=senses, sense_share=sense_share), punkt


__all__ = [
    "CONNECTIVES",
    "Lexicon",
    "build_opinion_lexicon",
    "combine_reviews",
    "is_skipped",
    "load_resources",
    "replace_synonyms",
    "sentiment_events",
    "sentiment_flipped",
    "shuffle_sentences",
    "split_sentences",
]
