"""The augmentation strategies and the semantic-preservation check, one review at a time.

Every function is pure given its ``random.Random``: the stage seeds one per review from (seed, uid), so the
output does not depend on the order or the process a review is handled in.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from tasks.augmentation.lexicon import STOP_WORDS, Lexicon, is_negation, is_skipped

# A word: letters with inner apostrophes ("isn't", "movie's"), not glued to digits or other letters ("2nd").
WORD_RE = re.compile(r"(?<![\w'])[A-Za-z]+(?:'[A-Za-z]+)*(?![\w'])")
# IMDB marks paragraphs with <br /> tags; Punkt cannot see a boundary in "end.<br /><br />Next".
BREAK_RE = re.compile(r"(?:\s*<br\s*/?>\s*)+", re.IGNORECASE)
# Tokens of the sentiment check: tags, words, and single punctuation marks (which end a negation's scope).
TOKEN_RE = re.compile(r"<[^>]*>|[A-Za-z]+(?:'[A-Za-z]+)*|[^\sA-Za-z0-9]")
NEGATION_SCOPE = 3  # a negation flips the polarity of up to this many following words, up to punctuation

# Additive connectives for hierarchical (combo) samples: they join reviews of one label, so none is contrastive.
CONNECTIVES = (
    "Also,",
    "Moreover,",
    "Furthermore,",
    "In addition,",
    "Besides,",
    "On top of that,",
    "What is more,",
    "Additionally,",
)


# --- sentence shuffle ---------------------------------------------------------------------------------
def split_sentences(text: str, punkt) -> list[str]:
    """Sentences of ``text``: ``<br />`` runs are hard breaks, Punkt splits each paragraph; stripped, none empty."""
    out = []
    for paragraph in BREAK_RE.split(text):
        paragraph = paragraph.strip()
        if paragraph:
            out.extend(s.strip() for s in punkt.tokenize(paragraph) if s.strip())
    return out


def shuffle_sentences(text: str, punkt, rng: random.Random, *, keep_pair_p: float) -> list[str] | None:
    """The sentences of ``text`` in a new order (join them with spaces), or None when no new order exists.

    Walking left to right, a sentence is glued to the next one with probability ``keep_pair_p`` (blocks of at
    most two sentences, as in the authors' code), then the blocks are permuted; an identity permutation is
    rotated by one, so a review of two or more blocks always changes.
    """
    sentences = split_sentences(text, punkt)
    blocks, i = [], 0
    while i < len(sentences):
        take = 2 if i + 1 < len(sentences) and rng.random() < keep_pair_p else 1
        blocks.append(sentences[i : i + take])
        i += take
    if len(blocks) < 2:
        return None
    order = list(range(len(blocks)))
    rng.shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    shuffled = [s for k in order for s in blocks[k]]
    return None if shuffled == sentences else shuffled  # e.g. a review of repeated sentences


# --- synonym replacement ------------------------------------------------------------------------------
def replace_synonyms(text: str, lexicon: Lexicon, rng: random.Random, *, word_rate: float) -> tuple[str, int] | None:
    """``(new text, words replaced)`` or None when no word of ``text`` can be replaced.

    Aims at ``max(1, round(word_rate * words))`` replacements, trying the words in a seeded random order.
    A word is replaced only when it is not skipped (``lexicon.is_skipped``), its POS is known in context
    (``Lexicon.tag``), it is a base form (or a regular plural noun, re-inflected with ``-s``) and it has a
    guarded synonym (``Lexicon.synonyms``: same polarity, not an antonym; after "a"/"an" one with the same
    vowel/consonant start, approximately). Everything between words (spacing,
    punctuation, tags) is kept byte for byte.
    """
    matches = list(WORD_RE.finditer(text))
    if not matches:
        return None
    target = max(1, round(word_rate * len(matches)))
    order = list(range(len(matches)))
    rng.shuffle(order)
    chosen: dict[int, str] = {}
    for i in order:
        if len(chosen) >= target:
            break
        word = matches[i].group()
        if is_skipped(word):
            continue
        previous = None
        if i > 0 and text[matches[i - 1].end() : matches[i].start()].isspace():
            previous = matches[i - 1].group().lower()
        tagged = lexicon.tag(word, previous)
        if tagged is None:
            continue
        pos, base = tagged
        suffix = ""
        if base != word:
            if pos != "n" or word != base + "s":
                continue  # an inflected form: the base-form synonym would lose the inflection
            suffix = "s"
        candidates = lexicon.synonyms(base, pos)
        if suffix:  # regular plurals only; the surface form may carry a polarity its base lacks ("tops")
            polarity = lexicon.polarity(word)
            candidates = tuple(
                c
                for c in candidates
                if not c.endswith(("s", "x", "z", "ch", "sh", "y")) and lexicon.polarity(c + suffix) == polarity
            )
        if previous in ("a", "an"):  # keep "a"/"an" right without touching the article (a stop word)
            candidates = tuple(c for c in candidates if (c[0] in "aeiou") == (word[0] in "aeiou"))
        if candidates:
            chosen[i] = rng.choice(candidates) + suffix
    if not chosen:
        return None
    parts, last = [], 0
    for i in sorted(chosen):
        m = matches[i]
        parts += [text[last : m.start()], chosen[i]]
        last = m.end()
    parts.append(text[last:])
    return "".join(parts), len(chosen)


# --- hierarchical samples -----------------------------------------------------------------------------
def _decapitalise(text: str) -> str:
    """Lower the first letter when the review opens with a capitalised stop word ("The" -> "the"), not "I"."""
    m = WORD_RE.match(text)
    word = m.group() if m else ""
    if word and word != "I" and word[0].isupper() and word.lower() in STOP_WORDS and word[1:] == word[1:].lower():
        return text[0].lower() + text[1:]
    return text


def combine_reviews(texts: list[str], connectives: list[str]) -> str:
    """``texts`` joined in order, each after the first introduced by its connective ("Moreover, the ...")."""
    if len(connectives) != len(texts) - 1:
        raise ValueError(f"{len(texts)} reviews need {len(texts) - 1} connectives, got {len(connectives)}")
    pieces = [texts[0].strip()] + [f"{c} {_decapitalise(t.strip())}".strip() for c, t in zip(connectives, texts[1:])]
    return " ".join(p for p in pieces if p)


# --- semantic preservation ----------------------------------------------------------------------------
def sentiment_events(text: str, lexicon: Lexicon) -> list[tuple[str, int | None]]:
    """``(word, signed polarity)`` for every opinion or ambiguous word, in order.

    A negation ("not", "never", "-n't", ...) flips the sign of the next ``NEGATION_SCOPE`` words, up to the
    next punctuation mark or tag; ambiguous words keep None (their sign is unknown, their presence is not).
    """
    events, scope = [], 0
    for token in TOKEN_RE.findall(text):
        if not token[0].isalpha():
            scope = 0
            continue
        word = token.lower()
        if is_negation(word):
            scope = NEGATION_SCOPE
            continue
        polarity = lexicon.polarity(word)
        if polarity != 0:
            events.append((word, None if polarity is None else (-polarity if scope else polarity)))
        scope = max(0, scope - 1)
    return events


def sentiment_flipped(parents: list[str], augmented: str, lexicon: Lexicon, *, aligned: bool) -> bool:
    """True when ``augmented`` does not carry the sentiment of ``parents``: the row must be rejected.

    ``aligned`` (synonym rows, one parent, word for word): the signed polarities must match position by
    position, and no replaced word may be an antonym of the original in *any* POS or sense (the replacement
    only guarded the tagged POS). Otherwise (shuffles, combos): the multiset of (word, signed polarity) must
    equal the parents' together, so moving a sentence must not move a word into or out of a negation's scope.
    """
    if aligned:
        (parent,) = parents
        before, after = WORD_RE.findall(parent), WORD_RE.findall(augmented)
        if len(before) != len(after):
            return True
        for old, new in zip(before, after):
            if old != new and (
                new.lower() in lexicon.antonyms(old.lower()) or old.lower() in lexicon.antonyms(new.lower())
            ):
                return True
        return [p for _, p in sentiment_events(parent, lexicon)] != [p for _, p in sentiment_events(augmented, lexicon)]
    expected = Counter()
    for parent in parents:
        expected.update(sentiment_events(parent, lexicon))
    return Counter(sentiment_events(augmented, lexicon)) != expected
