"""The augment stage: strategies, the semantic check, determinism, and the stage on a generated folder.

Tests that load NLTK's WordNet (~5-10 s once per session) are marked slow.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swarmlab.drive.sections import section
from tasks.augmentation.pool import augment_train, init_worker, pick, plan_combos, with_provenance
from tasks.imdb_data import augment
from swarmlab.drive.sections import AugmentConfig
from swarmlab.errors import SwarmlabError
from swarmlab.drive.params import load_params
from swarmlab.paths import PARAMS_FILE, datasets_dir
from tasks.augmentation.lexicon import NEGATIONS, NUMBER_WORDS, STOP_WORDS, is_skipped
from tasks.augmentation.strategies import WORD_RE
from tasks.imdb_sources import SCHEMA
from tests.conftest import imdb_step

NLTK_DIR = datasets_dir(load_params()) / "nltk_data"
slow = pytest.mark.slow


@pytest.fixture(scope="session")
def resources():
    cfg = AugmentConfig()
    return init_worker(str(NLTK_DIR), cfg.synonym_senses, cfg.sense_share)  # shared with the stage in this process


# --- generated reviews ------------------------------------------------------------------------------------
POS_SENTENCES = [
    "This movie was a wonderful surprise.",
    "The acting is excellent and the story is moving.",
    "I loved the soundtrack.",
    "The director did a great job with the plot.",
    "Every scene looks beautiful.",
    "It is not boring for a single minute.",
    "The cast is superb, especially the lead actor.",
    "I would recommend this film to anyone.",
]
NEG_SENTENCES = [
    "This movie was a terrible waste of time.",
    "The acting is awful and the story is dull.",
    "I hated the soundtrack.",
    "The director did a poor job with the plot.",
    "Every scene looks cheap and ugly.",
    "It is not interesting for a single minute.",
    "The cast is weak, especially the lead actor.",
    "I would not recommend this film to anyone.",
]


def make_reviews(n: int, seed: int, split: str = "train") -> pa.Table:
    """``n`` prepared-layout rows (half per label) of 1-6 template sentences, paragraphs as in IMDB."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % 2
        pool = POS_SENTENCES if label else NEG_SENTENCES
        sentences = rng.sample(pool, rng.randint(1, 6))
        text = " ".join(sentences[:2]) + ("<br /><br />" + " ".join(sentences[2:]) if len(sentences) > 2 else "")
        rows.append(
            dict(
                uid=f"{split}/{'pos' if label else 'neg'}/{1000 + i}",
                text=text + f" Review {i}.",
                label=label,
                rating=8 if label else 2,
                review_id=1000 + i,
            )
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def write_prepared(folder: Path, n_train: int = 40, n_eval: int = 10) -> Path:
    from swarmlab.io import write_shards
    from tasks.imdb_data import write_meta

    folder.mkdir(parents=True)
    meta = {"splits": {}}
    for split, n, seed in (("train", n_train, 1), ("val", n_eval, 2), ("test", n_eval, 3)):
        table = make_reviews(n, seed, split)
        meta["splits"][split] = {"rows": n, "positive": n // 2, "shards": write_shards(table, folder, split, 2)}
    write_meta(folder, meta)  # with the shards' hashes, as the prepare step writes it
    return folder


def stage_params(**augment) -> dict:
    params = load_params(profile="smoke")
    params["augment"].update(augment)
    return params


def run_augment(params: dict, prepared: Path, out_dir: Path) -> tuple[dict, dict]:
    """The augment step as the data stage runs it (into a new folder): its ``meta.json`` and its summary."""
    out_dir.mkdir()
    summary = augment(section(params, "augment"), prepared, out_dir, datasets=datasets_dir(params), seed=params["seed"])
    return json.loads((out_dir / "meta.json").read_text()), summary


def read_split(folder: Path, split: str) -> pa.Table:
    meta = json.loads((folder / "meta.json").read_text())
    return pa.concat_tables([pq.read_table(folder / s) for s in meta["splits"][split]["shards"]])


# --- sentence shuffle -------------------------------------------------------------------------------------
SHUFFLE_TEXTS = [
    "First sentence here. Second one follows! Is this the third? Yes, the fourth.",
    "Mr. Smith liked it. Dr. Who did not.<br /><br />A new paragraph starts. It ends here",
    " ".join(POS_SENTENCES),
]


@slow
@pytest.mark.parametrize("text", SHUFFLE_TEXTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("keep_pair_p", [0.0, 0.7, 1.0])
def test_shuffle_preserves_the_multiset_of_sentences(resources, text, seed, keep_pair_p):
    from tasks.augmentation import shuffle_sentences, split_sentences

    _, punkt = resources
    original = split_sentences(text, punkt)
    shuffled = shuffle_sentences(text, punkt, random.Random(seed), keep_pair_p=keep_pair_p)
    assert shuffled is not None and shuffled != original
    assert Counter(shuffled) == Counter(original)
    if keep_pair_p == 1.0:  # every block is a pair (the last maybe single): pairs stay adjacent and in order
        pairs = [tuple(original[i : i + 2]) for i in range(0, len(original) - 1, 2)]
        assert all(any(shuffled[j : j + 2] == list(p) for j in range(len(shuffled))) for p in pairs)


@slow
def test_sentence_split_uses_paragraph_breaks_and_punkt_abbreviations(resources):
    from tasks.augmentation import split_sentences

    _, punkt = resources
    assert split_sentences("Mr. Smith came.<br /><br />He left.<br/>Bye", punkt) == [
        "Mr. Smith came.",
        "He left.",
        "Bye",
    ]


# --- synonym replacement ----------------------------------------------------------------------------------
HAND_MADE = [
    "The movie was good, but the plot was not very interesting and the ending felt boring.",
    "I didn't like the acting; the story is dull and the dialogue is awful.",
    "Tom Hanks gives a brilliant performance in this beautiful film about two brothers.",
    "Never have I seen a worse film. No one should watch this garbage, not even once.",
    "The first half is wonderful, the second half is terrible, and the music is excellent.",
    "It is a great story with a happy ending, superb actors and an amazing soundtrack.",
    "The characters are stupid, the jokes are lame and the whole thing is a disaster.",
    "I love this movie and I hate its sequel; three stars out of ten for the sequel.",
]
# Hand-picked words of unmistakable polarity, independent of the lexicon under test.
CLEAR_POSITIVE = set(
    "good great wonderful excellent brilliant beautiful superb amazing happy love interesting best better".split()
)
CLEAR_NEGATIVE = set("bad terrible awful dull boring stupid lame disaster garbage hate worse worst poor".split())


def changed_words(before: str, after: str) -> list[tuple[str, str]]:
    a, b = WORD_RE.findall(before), WORD_RE.findall(after)
    assert len(a) == len(b), "synonym replacement must keep the word count"
    return [(x, y) for x, y in zip(a, b) if x != y]


@slow
@pytest.mark.parametrize("seed", range(5))
def test_synonyms_never_touch_skipped_classes(resources, seed):
    from tasks.augmentation import replace_synonyms

    lexicon, _ = resources
    total = 0
    for text in HAND_MADE:
        out = replace_synonyms(text, lexicon, random.Random(seed), word_rate=1.0)
        if out is None:
            continue
        new_text, n = out
        changes = changed_words(text, new_text)
        assert len(changes) == n > 0
        total += n
        for old, _new in changes:
            assert old not in STOP_WORDS and old.lower() not in NEGATIONS and "n't" not in old
            assert old not in NUMBER_WORDS and old[0].islower() and not is_skipped(old)
        for word in WORD_RE.findall(text):  # and every skipped word is still there, in place
            if is_skipped(word):
                assert all(word != old for old, _ in changes)
    assert total > 10, "the hand-made sentences must exercise the replacement"


@slow
@pytest.mark.parametrize("seed", range(5))
def test_synonyms_never_flip_polarity(resources, seed):
    from tasks.augmentation import replace_synonyms

    lexicon, _ = resources
    for text in HAND_MADE:
        out = replace_synonyms(text, lexicon, random.Random(seed), word_rate=1.0)
        if out is None:
            continue
        for old, new in changed_words(text, out[0]):
            assert not (old in CLEAR_POSITIVE and new in CLEAR_NEGATIVE), (old, new)
            assert not (old in CLEAR_NEGATIVE and new in CLEAR_POSITIVE), (old, new)
            assert lexicon.polarity(new) == lexicon.polarity(old), (old, new)
            assert new not in lexicon.antonyms(old) and old not in lexicon.antonyms(new), (old, new)


@slow
def test_synonyms_keep_text_between_words(resources):
    from tasks.augmentation import replace_synonyms

    lexicon, _ = resources
    text = "The  movie, (a film!) -- was shown<br /><br />at 8pm; the 2nd story was 10/10."
    new_text, _ = replace_synonyms(text, lexicon, random.Random(0), word_rate=1.0)
    assert WORD_RE.sub("W", new_text) == WORD_RE.sub("W", text)


@slow
def test_opinion_lexicon_and_pos_lookup(resources):
    lexicon, _ = resources
    assert [lexicon.polarity(w) for w in ("good", "superb", "bad", "worst", "terribly", "movie")] == [
        1,
        1,
        -1,
        -1,
        -1,
        0,
    ]
    assert len(lexicon.opinion) > 300 and not set(lexicon.opinion) & lexicon.ambiguous
    assert lexicon.tag("movie", None) == ("n", "movie")
    assert lexicon.tag("films", None) == ("n", "film")
    assert lexicon.tag("watch", "to")[0] == "v" and lexicon.tag("watch", "the")[0] == "n"
    assert lexicon.tag("beautifully", None)[0] == "r"
    assert "bad" in lexicon.antonyms("good", "a") and "bad" in lexicon.antonyms(
        "superb"
    )  # via its head adjective, good


# --- the semantic check -----------------------------------------------------------------------------------
@slow
@pytest.mark.parametrize(
    "parents, augmented, aligned, flipped",
    [
        (["The film was good."], "The film was bad.", True, True),  # opposite polarity
        (["The film was good."], "The film was fine.", True, True),  # polar -> ambiguous/neutral
        (["The film was good."], "The picture was good.", True, False),
        (
            ["I saw it twice.<br /><br />Never again.<br /><br />Good acting."],
            "Good acting. Never again. I saw it twice.",
            False,
            False,
        ),
        (
            ["Give it to nobody<br /><br />Good acting though."],
            "Give it to nobody Good acting though.",
            False,
            True,
        ),  # into a negation's scope
        (["A good film.", "A great cast."], "A good film. Moreover, a great cast.", False, False),
        (["A good film.", "A great cast."], "A good film. Moreover, a bad cast.", False, True),
    ],
)
def test_sentiment_check(resources, parents, augmented, aligned, flipped):
    from tasks.augmentation import sentiment_flipped

    lexicon, _ = resources
    assert sentiment_flipped(parents, augmented, lexicon, aligned=aligned) is flipped


# --- awkward inputs ---------------------------------------------------------------------------------------
AWKWARD = {
    "empty": "",
    "blank": "   <br /><br />  ",
    "punctuation": "!!! ... ??? 10/10",
    "french": "Ce film est magnifique. Je l'ai adoré, vraiment! Les acteurs sont très bons.",
    "chinese": "这部电影很好看。演员很棒！我推荐它。",
    "one sentence": "Just one sentence without a stop",
    "very long": " ".join(POS_SENTENCES * 400),
}


@slow
@pytest.mark.parametrize("name", list(AWKWARD))
def test_awkward_reviews_are_handled(resources, name):
    from tasks.augmentation import (
        combine_reviews,
        replace_synonyms,
        sentiment_flipped,
        shuffle_sentences,
        split_sentences,
    )

    lexicon, punkt = resources
    text = AWKWARD[name]
    sentences = split_sentences(text, punkt)
    shuffled = shuffle_sentences(text, punkt, random.Random(0), keep_pair_p=0.7)
    if len(sentences) < 2:
        assert shuffled is None
    if shuffled is not None:
        assert Counter(shuffled) == Counter(sentences)
    out = replace_synonyms(text, lexicon, random.Random(0), word_rate=0.1)
    if not WORD_RE.search(text):
        assert out is None
    if out is not None:
        assert not sentiment_flipped([text], out[0], lexicon, aligned=True)
    combo = combine_reviews([text, "A good film."], ["Also,"])
    assert combo.endswith("Also, a good film.")
    if name == "very long":
        assert shuffled is not None and out is not None and out[1] == round(0.1 * len(WORD_RE.findall(text)))


# --- selection, config ------------------------------------------------------------------------------------
def test_pick_is_exact_and_independent_of_order():
    uids = [f"train/pos/{i}" for i in range(1000)]
    picked = {uids[i] for i in pick(uids, 0.3, 7, "shuffle")}
    rev = uids[::-1]
    assert len(picked) == 300 and picked == {rev[i] for i in pick(rev, 0.3, 7, "shuffle")}
    assert (
        picked != {uids[i] for i in pick(uids, 0.3, 7, "synonym")} != {uids[i] for i in pick(uids, 0.3, 8, "shuffle")}
    )


def test_combos_share_a_label_and_have_distinct_parents():
    table = make_reviews(50, 0)
    uids, labels = table.column("uid").to_pylist(), table.column("label").to_pylist()
    label_of = dict(zip(uids, labels))
    plans = plan_combos(uids, labels, AugmentConfig(), seed=3)
    assert len(plans) == round(0.25 * 50)
    for parents, connectives in plans:
        assert 2 <= len(parents) <= 3 and len(set(parents)) == len(parents) and len(connectives) == len(parents) - 1
        assert len({label_of[p] for p in parents}) == 1
    assert plans == plan_combos(uids[::-1], labels[::-1], AugmentConfig(), seed=3)


@pytest.mark.parametrize(
    "bad",
    [
        {"shuffle_fraction": 1.5},
        {"keep_pair_p": -0.1},
        {"combo_min": 1},
        {"combo_min": 3, "combo_max": 2},
        {"workers": 0},
    ],
)
def test_config_rejects_bad_values(bad):
    with pytest.raises(SwarmlabError):
        AugmentConfig(**bad)


def test_missing_nltk_data_names_the_folder(tmp_path):
    from tasks.augmentation.resources import load_nltk

    with pytest.raises(SwarmlabError, match=str(tmp_path)):
        load_nltk(tmp_path)


def test_ablation_is_one_top_level_override(tmp_path):
    text = PARAMS_FILE.read_text()
    assert "\naugment:\n  enabled: true\n" in text
    (tmp_path / "params.yaml").write_text(
        text.replace("\naugment:\n  enabled: true\n", "\naugment:\n  enabled: false\n")
    )
    for profile in ("smoke", "cpu", "paper"):
        assert load_params(tmp_path / "params.yaml", profile)["augment"]["enabled"] is False
        assert load_params(profile=profile)["augment"]["enabled"] is True


# --- whole-table behaviour --------------------------------------------------------------------------------
@slow
def test_labels_preserved_and_rows_traceable(resources):
    train = make_reviews(60, 5)
    table, stats = augment_train(train, AugmentConfig(workers=1), seed=0, nltk_dir=NLTK_DIR)
    rows = table.to_pylist()
    by_uid = {r["uid"]: r for r in rows}
    assert len(by_uid) == len(rows)
    originals = {r["uid"]: r for r in train.to_pylist()}
    for r in rows:
        assert all(p in originals for p in r["parents"])
        assert {originals[p]["label"] for p in r["parents"]} == {r["label"]}
        if r["source"] == "original":
            assert r["parents"] == [r["uid"]] and r["text"] == originals[r["uid"]]["text"]
        else:
            assert (
                r["uid"].startswith(r["parents"][0] + "#" + r["source"])
                and r["text"] != originals[r["parents"][0]]["text"]
            )
    counts = Counter(r["source"] for r in rows)
    assert counts["original"] == 60 and counts["combo"] == 15
    for kind in ("shuffle", "synonym"):
        s = stats["strategies"][kind]
        assert s["selected"] == 18 == s["written"] + s["skipped"] + s["rejected"] and counts[kind] == s["written"] > 0


@slow
def test_output_does_not_depend_on_worker_count(resources):
    train = make_reviews(80, 9)
    one, _ = augment_train(train, AugmentConfig(workers=1), seed=4, nltk_dir=NLTK_DIR)
    two, _ = augment_train(train, AugmentConfig(workers=2), seed=4, nltk_dir=NLTK_DIR)
    assert one.equals(two)
    other, _ = augment_train(train, AugmentConfig(workers=1), seed=5, nltk_dir=NLTK_DIR)
    assert not one.equals(other)


def test_disabled_copies_train_through():
    train = make_reviews(20, 1)
    table, stats = augment_train(train, AugmentConfig(enabled=False), seed=0, nltk_dir=None)
    assert table.select(list(SCHEMA.names)).equals(train)
    assert set(table.column("source").to_pylist()) == {"original"}
    assert table.column("parents").to_pylist() == [[u] for u in train.column("uid").to_pylist()]
    assert table.schema == with_provenance(train).schema and stats["enabled"] is False


@slow
@pytest.mark.parametrize("enabled", [True, False])
def test_stage_end_to_end(resources, tmp_path, enabled):
    prepared = write_prepared(tmp_path / "prepared")
    params = stage_params(enabled=enabled)
    meta, metrics = run_augment(params, prepared, tmp_path / "a1")
    run_augment(params, prepared, tmp_path / "a2")
    # same seed -> byte-identical shards; val/test shards are the prepared files byte for byte
    for split in ("train", "val", "test"):
        for shard in meta["splits"][split]["shards"]:
            assert (tmp_path / "a1" / shard).read_bytes() == (tmp_path / "a2" / shard).read_bytes()
            if split != "train":
                assert (tmp_path / "a1" / shard).read_bytes() == (prepared / shard).read_bytes()
    train = read_split(tmp_path / "a1", "train")
    assert train.num_rows == meta["splits"]["train"]["rows"]
    sources = Counter(train.column("source").to_pylist())
    assert sources["original"] == 40 and (sum(sources.values()) > 40) is enabled
    assert metrics["train_rows"] == train.num_rows and metrics["combo_rows"] == sources["combo"]
    # the tokenize stage reads the augmented layout as it read the prepared one
    tok = imdb_step(params, "tokenize", tmp_path / "tokenized", tmp_path / "a1")
    assert tok["splits"]["train"]["rows"] == train.num_rows and tok["splits"]["val"]["rows"] == 10
    # a different seed changes the augmented rows, never the originals
    other, _ = run_augment({**params, "seed": params["seed"] + 1}, prepared, tmp_path / "a3")
    train3 = read_split(tmp_path / "a3", "train")
    orig = lambda t: sorted(r["text"] for r in t.to_pylist() if r["source"] == "original")  # noqa: E731
    assert orig(train3) == orig(train) and other["splits"]["train"]["by_source"]["original"] == 40
    if enabled:
        assert sorted(train3.column("text").to_pylist()) != sorted(train.column("text").to_pylist())


def test_stage_without_prepare_says_so(tmp_path):
    with pytest.raises(SwarmlabError, match="prepare"):
        run_augment(stage_params(), tmp_path / "nothing", tmp_path / "out")
