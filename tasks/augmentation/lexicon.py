"""Word classes, a WordNet opinion lexicon, a WordNet POS lookup and guarded synonyms.

Everything here is built from the shipped WordNet 3.0 and small lists written below; nothing is downloaded.

Skipped word classes (never replaced, never offered as a synonym):
  * ``STOP_WORDS``: the closed-class words of NLTK's English stop-word list (that corpus is not shipped),
    plus a few fillers that WordNet gives absurd synonyms for (``get``, ``really``); negations are apart.
  * ``NEGATIONS``: not, never, no, nothing, ... and every ``-n't`` contraction (``isn't``, ``dont``).
  * ``NUMBER_WORDS``: cardinals and ordinals in words (WordNet's synonyms of "one" include "I" and "ace");
    digits never match the word pattern at all.
  * capitalised words (names, titles, "I", sentence starts) and words shorter than 3 letters.

Opinion lexicon (``build_opinion_lexicon``): hand-picked seed words of clear polarity (adjectives, nouns,
verbs a reviewer uses: good/bad, masterpiece/disaster, love/hate), grown one step through WordNet: the
lemmas of each seed's dominant senses (SemCor count >= 70% of its most frequent sense's) and, for head
adjectives, their ``similar_to`` satellites keep the seed's polarity; their ``antonym`` links get the
opposite one. A word reached with both polarities is
*ambiguous*: it is never replaced and never used as a replacement. Adverbs inherit the polarity of their
adjective (``terribly`` -> ``terrible``); inflected forms that of their WordNet base form (``worst`` -> ``bad``).

POS: NLTK's averaged-perceptron tagger is not shipped, and neither is any tagged corpus to train one. Each
word gets the part of speech with the most SemCor-tagged senses in WordNet (``cntlist.rev``; the number of
senses breaks ties and covers untagged words), the classic most-frequent-tag baseline, restricted by the
previous word (after a determiner: noun or adjective; after "to": verb or noun; after a modal or a subject
pronoun: verb or adverb; after an intensifier: adjective or adverb). A word whose POS stays ambiguous
(no context rule and the top POS holds less than ``MIN_POS_SHARE`` of the counts) is not replaced.
"""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    """
a about above after again against ain all am an and any are aren as at be because been before being below
between both but by can could couldn d did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just ll m ma me mightn more
most must my myself needn now o of off on once only or other our ours ourselves out over own re s same shan
she should so some such t than that the their theirs them themselves then there these they this those through
to too under until up ve very was we were what when where which while who whom why will with would y you your
yours yourself yourselves also get gets got getting go goes going gone went really even still yet quite rather
much many lot lots thing things way ever every may might shall let lets one ones
""".split()
)

NEGATIONS = frozenset(
    """
not no never none nobody nothing nowhere neither nor without cannot cant dont doesnt didnt isnt arent wasnt
werent wont wouldnt couldnt shouldnt hasnt havent hadnt aint hardly barely scarcely seldom rarely lack lacks
lacking
""".split()
)

NUMBER_WORDS = frozenset(
    """
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand
thousands million millions billion billions dozen dozens first second third fourth fifth sixth seventh eighth
ninth tenth half once twice single double triple
""".split()
)

# Seeds of the opinion lexicon: unambiguous, frequent in reviews. POS as WordNet letters.
POSITIVE_SEEDS = {
    "a": """good great best better excellent wonderful superb brilliant amazing fantastic beautiful enjoyable entertaining
            funny interesting perfect nice pleasant positive fortunate correct superior outstanding magnificent
            terrific delightful memorable impressive charming clever marvelous lovely touching gripping
            compelling hilarious exceptional splendid admirable fascinating engaging""".split(),
    "n": "masterpiece gem delight pleasure success triumph joy treat brilliance excellence".split(),
    "v": "love enjoy adore admire recommend praise appreciate".split(),
}
NEGATIVE_SEEDS = {
    "a": """bad worse worst terrible awful horrible poor boring dull stupid dumb ugly nasty negative unfortunate wrong inferior
            lame pathetic ridiculous weak annoying disappointing mediocre pointless unpleasant dreadful atrocious
            worthless silly tedious laughable incompetent bland clumsy predictable horrendous unwatchable""".split(),
    "n": "disaster failure mess waste garbage trash junk crap flop disappointment nonsense rubbish".split(),
    "v": "hate dislike despise loathe detest regret suck fail disappoint annoy".split(),
}

POS_LETTERS = ("n", "v", "a", "r")
MIN_POS_SHARE = 2 / 3  # without a context rule, the top POS must hold this share of the SemCor counts
LEXICON_SENSE_SHARE = 0.7  # the opinion lexicon grows from a seed's senses with >= 70% of its top sense's count

# Context rules of the POS lookup: previous word -> the parts of speech the next word may take.
DETERMINERS = frozenset(
    "the a an this that these those his her its their my your our some any every each no "
    "another such what which whose".split()
)
MODALS = frozenset("will would can could should must may might shall do does did".split())
SUBJECT_PRONOUNS = frozenset("i you we they he she".split())
INTENSIFIERS = frozenset("very so too really quite extremely pretty rather most more less incredibly truly".split())
CONTEXT_POS = {
    **{w: ("n", "a") for w in DETERMINERS},
    "to": ("v", "n"),
    **{w: ("v", "r") for w in MODALS | SUBJECT_PRONOUNS},
    **{w: ("a", "r") for w in INTENSIFIERS},
}

PLAIN_WORD = re.compile(r"[a-z]+")


def is_negation(word: str) -> bool:
    w = word.lower()
    return w in NEGATIONS or w.endswith("n't")


def is_skipped(word: str) -> bool:
    """True for words synonym replacement must leave alone (see the module docstring)."""
    return (
        len(word) < 3
        or not word.isalpha()
        or word[0].isupper()
        or word.lower() != word
        or word in STOP_WORDS
        or word in NUMBER_WORDS
        or is_negation(word)
    )


def _plain(name: str) -> str | None:
    """A WordNet lemma name usable as one lowercase word, else None (multi-word, hyphenated, capitalised)."""
    return name if PLAIN_WORD.fullmatch(name) else None


def dominant_senses(wn, counts: dict[str, int], word: str, pos: str, *, share: float, cap: int) -> list:
    """The synsets of ``word`` as a ``pos`` that hold at least ``share`` of the SemCor count of its most frequent
    sense (at most ``cap``, most frequent first); only the first sense when WordNet has no count for ``word``."""
    scored = []
    for synset in wn.synsets(word, pos):
        lemma = next((l for l in synset.lemmas() if l.name() == word), None)
        if lemma is not None:  # synsets() also returns the senses of other base forms ("films" -> "film")
            scored.append((counts.get(lemma.key(), 0), synset))
    if not scored:
        return []
    top = max(c for c, _ in scored)
    if top == 0:
        return [scored[0][1]]
    return [s for c, s in scored if c >= share * top][:cap]


def build_opinion_lexicon(
    wn, counts: dict[str, int], *, share: float = LEXICON_SENSE_SHARE
) -> tuple[dict[str, int], frozenset[str]]:
    """``(polarity, ambiguous)``: word -> +1 / -1, and the words reached with both polarities.

    Seeds plus one WordNet step (see the module docstring) from each seed's dominant senses only
    (``dominant_senses`` with ``share``), because WordNet propagation drifts through rare senses
    (``great`` -> "large", ``funny`` -> "odd", and ``good`` reaches ``bad`` within a few synonym hops).
    """
    votes: dict[str, set[int]] = {}

    def vote(name: str, polarity: int) -> None:
        word = _plain(name)
        if word is not None:
            votes.setdefault(word, set()).add(polarity)

    for seeds, polarity in ((POSITIVE_SEEDS, 1), (NEGATIVE_SEEDS, -1)):
        for pos, words in seeds.items():
            for seed in words:
                vote(seed, polarity)
                for synset in dominant_senses(wn, counts, seed, pos, share=share, cap=3):
                    neighbours = [synset] + (synset.similar_tos() if synset.pos() == "a" else [])
                    for s in neighbours:
                        for lemma in s.lemmas():
                            vote(lemma.name(), polarity)
                            for antonym in lemma.antonyms():
                                vote(antonym.name(), -polarity)
    polarity = {w: next(iter(v)) for w, v in votes.items() if len(v) == 1}
    ambiguous = frozenset(w for w, v in votes.items() if len(v) > 1)
    return polarity, ambiguous


class Lexicon:
    """WordNet-backed lookups with per-word caches: polarity, POS, antonyms and guarded synonyms.

    Args:
        wn: NLTK's WordNet reader (loaded from the shipped data).
        counts: sense key -> SemCor count (``resources.sense_counts``).
        senses: synonyms come from at most this many senses of the word's POS (most frequent first) ...
        sense_share: ... each holding at least this share of the SemCor count of the most frequent sense.
    """

    def __init__(self, wn, counts: dict[str, int], *, senses: int = 3, sense_share: float = 0.5):
        self.wn = wn
        self.counts = counts
        self.senses = senses
        self.sense_share = sense_share
        self.opinion, self.ambiguous = build_opinion_lexicon(wn, counts)
        self._polarity: dict[str, int | None] = {}
        self._pos: dict[str, tuple] = {}
        self._synonyms: dict[tuple[str, str], tuple[str, ...]] = {}
        self._antonyms: dict[tuple[str, str], frozenset[str]] = {}

    # --- polarity -----------------------------------------------------------------------------------
    def polarity(self, word: str) -> int | None:
        """+1 / -1 for opinion words, 0 for neutral ones, None for ambiguous ones (treated as sentiment)."""
        w = word.lower()
        if w in self._polarity:
            return self._polarity[w]
        result = self._lookup_polarity(w)
        self._polarity[w] = result
        return result

    def _lookup_polarity(self, w: str) -> int | None:
        if w in self.ambiguous:
            return None
        if w in self.opinion:
            return self.opinion[w]
        found = set()
        for pos in POS_LETTERS:
            base = self.wn.morphy(w, pos) if PLAIN_WORD.fullmatch(w) else None
            if base and base != w:
                if base in self.ambiguous:
                    return None
                if base in self.opinion:
                    found.add(self.opinion[base])
        if not found and w.endswith("ly") and len(w) > 4:  # adverb -> adjective: terribly, happily, badly
            stem = w[:-2]
            for adj in (stem, stem[:-1] + "y" if stem.endswith("i") else stem, stem + "e", stem + "le"):
                if adj in self.ambiguous:
                    return None
                if adj in self.opinion:
                    found.add(self.opinion[adj])
        if len(found) > 1:
            return None
        return found.pop() if found else 0

    # --- POS ----------------------------------------------------------------------------------------
    def pos_readings(self, word: str) -> tuple[tuple[str, str, int, int], ...]:
        """``(pos, base form, SemCor count, number of senses)`` for each POS WordNet has ``word`` in, best first."""
        if word in self._pos:
            return self._pos[word]
        out = []
        for pos in POS_LETTERS:
            lemmas = self.wn.lemmas(word, pos)
            base = word
            if not lemmas:
                base = self.wn.morphy(word, pos)
                lemmas = self.wn.lemmas(base, pos) if base else []
            if lemmas:
                count = sum(self.counts.get(l.key(), 0) for l in lemmas)
                out.append((pos, base, count, len(lemmas)))
        out.sort(key=lambda r: (-r[2], -r[3], POS_LETTERS.index(r[0])))
        self._pos[word] = tuple(out)
        return self._pos[word]

    def tag(self, word: str, previous: str | None) -> tuple[str, str] | None:
        """``(pos, base form)`` for ``word`` after ``previous`` (None when unknown or ambiguous)."""
        readings = self.pos_readings(word)
        if not readings:
            return None
        allowed = CONTEXT_POS.get(previous) if previous else None
        if allowed is not None:
            readings = [r for r in readings if r[0] in allowed]
            return (readings[0][0], readings[0][1]) if readings else None
        if word.endswith("ly") and any(r[0] == "r" for r in readings):
            r = next(r for r in readings if r[0] == "r")
            return r[0], r[1]
        total = sum(r[2] for r in readings)
        if len(readings) > 1 and total > 0 and readings[0][2] < MIN_POS_SHARE * total:
            return None
        if len(readings) > 1 and total == 0:
            return None  # no evidence at all: do not guess
        return readings[0][0], readings[0][1]

    # --- antonyms and synonyms ----------------------------------------------------------------------
    def antonyms(self, word: str, pos: str | None = None) -> frozenset[str]:
        """Antonyms of ``word`` (of one POS, or of every POS and sense when ``pos`` is None).

        For adjective satellites the antonyms of their head adjective count too (``superb`` -> via ``good`` -> ``bad``).
        """
        key = (word, pos or "*")
        if key in self._antonyms:
            return self._antonyms[key]
        out = set()
        for pos_ in [pos] if pos else POS_LETTERS:
            bases = {word, self.wn.morphy(word, pos_) or word}
            for base in bases:
                for synset in self.wn.synsets(base, pos_):
                    heads = synset.similar_tos() if synset.pos() == "s" else []
                    for s in [synset] + heads:
                        for lemma in s.lemmas():
                            if s is synset and lemma.name() != base:
                                continue
                            out.update(a.name() for a in lemma.antonyms())
        self._antonyms[key] = frozenset(out)
        return self._antonyms[key]

    def synonyms(self, base: str, pos: str) -> tuple[str, ...]:
        """Guarded replacements for the base form ``base`` as a ``pos``: one plain lowercase word each, from its
        dominant senses (``senses``, ``sense_share``), never a skipped word, always of the same opinion polarity as ``base`` (an
        ambiguous word gets none), never an antonym. Sorted, so the choice depends only on the seed."""
        key = (base, pos)
        if key in self._synonyms:
            return self._synonyms[key]
        polarity = self.polarity(base)
        out = set()
        if polarity is not None:
            own = dominant_senses(self.wn, self.counts, base, pos, share=self.sense_share, cap=self.senses)
            banned = self.antonyms(base, pos)
            for synset in own:
                for lemma in synset.lemmas():
                    word = _plain(lemma.name())
                    if (
                        word
                        and word != base
                        and not is_skipped(word)
                        and word not in banned
                        and self.polarity(word) == polarity
                    ):
                        out.add(word)
        self._synonyms[key] = tuple(sorted(out))
        return self._synonyms[key]
