"""Reads of one subject under the same settings: a grid point that changed only the training data is a re-read, not
a reproduction (the report relabels what the log's writer called it, never editing the log), and the report shows how
far a result moved when its settings were read again."""

from __future__ import annotations

import copy

from swarmlab.drive.report.ledger import SUPPORTED, Ledger, annotate_reads
from swarmlab.document import Document, to_markdown
from swarmlab.drive.report.render import read_blocks
from swarmlab.drive.report.reproductions import log_reproductions, others, relabel, relabelled, same_settings
from swarmlab.drive.report.testsplit import append_reads, load_log, log_line, read_entry, read_result
from tests.swarmlab.drive.report.test_ledger import claim, pair, reports, run_read  # noqa: F401 (the fixture)


def _line(seed=0, lr=1e-3, data="d1", commit="abc", accuracy=0.5, model="m", task="t", **extra):
    read = read_entry(
        task=task,
        registered=task,
        options={},
        model=model,
        overrides={},
        seed=seed,
        train={"lr": lr, "seed": seed},
        run=f"{model}-seed{seed}",
        profile="claims",
        commit=commit,
    )
    return log_line(
        read,
        task=task,
        registered=task,
        options={},
        data_fingerprint=data,
        overrides={},
        where=f"reports/evaluate/{task}",
        result={"test_accuracy": accuracy},
        **extra,
    )


def test_a_point_that_changed_only_the_training_data_is_a_re_read_and_the_log_stays_as_written(tmp_path):
    """The augment grid's case: both points have the same model config and training settings, and train on other
    data. The writer (testsplit.read_kind) calls the second a reproduction; the report counts it as a re-read."""
    path = tmp_path / "log.jsonl"
    append_reads(
        [
            _line(data="with-augment", grid="augment", point="enabled=true"),
            _line(data="without", accuracy=0.45, grid="augment", point="enabled=false"),
            _line(data="with-augment", commit="def"),  # the first point's settings again: a reproduction
            _line(data=None, commit="ghi"),  # a line from before the log had fingerprints: compared without it
            _line(lr=2e-3, data="with-augment", commit="jkl"),  # other training settings
        ],
        path,
    )
    written = path.read_bytes()
    log = load_log(path)
    assert [line["kind"] for line in log] == ["first", "reproduction", "reproduction", "reproduction", "re-read"]
    counted = relabel(log)
    changed = relabelled(counted)
    assert [line["kind"] for line in counted] == ["first", "re-read", "reproduction", "reproduction", "re-read"]
    assert [(line["point"], line["written_as"], line["kind"]) for line in changed] == [
        ("enabled=false", "reproduction", "re-read")
    ]
    assert log[1]["kind"] == "reproduction" and path.read_bytes() == written  # neither the lines nor the file edited
    assert same_settings(log[0], log[2]) and not same_settings(log[0], log[1]) and not same_settings(log[0], log[4])
    assert others(counted, counted[0]) == [counted[2], counted[3]]

    blocks = read_blocks(counted)  # the report's section words the relabelling and counts by the report's rule
    text = to_markdown(Document("reads", blocks))
    assert "2 re-reads of a (task, model, seed)" in text and "2 reproductions under the same settings" in text
    assert "1 line of the log is counted as another kind than it was written with" in text
    assert "`t` `m` (augment grid, enabled=false) at abc: 1 line written as reproduction, counted as re-read" in text


def test_reads_repeated_under_the_same_settings_show_how_far_their_results_moved():
    log = relabel(
        [
            _line(seed=0, accuracy=0.50, commit="a1"),
            _line(seed=1, accuracy=0.60, commit="a1"),
            _line(seed=0, accuracy=0.50, commit="b2"),  # identical
            _line(seed=1, accuracy=0.55, commit="b2"),  # moved (a net-time budget on another machine)
            _line(seed=0, accuracy=0.52, commit="c3", lr=3e-3),  # other settings: a re-read, not compared
            _line(seed=0, model="n", accuracy=0.7, commit="a1"),  # read once: no line
            {**_line(seed=0, model="old", commit="a1"), "identity": None, "train": None},  # backfilled, no digests
            {**_line(seed=0, model="old", commit="b2"), "identity": None, "train": None},
        ]
    )
    assert log_reproductions(log) == [
        "`t` `m`, profile `claims`: 2 seeds read again 2 times under the same settings at a1, b2: later results "
        "differ from the first by -0.0500 to +0.0000 (mean -0.0250); identical in 1"
    ]
    same = [_line(seed=s, accuracy=0.5, commit=c) for c in ("a1", "b2") for s in (0, 1)]
    assert log_reproductions(relabel(same)) == [
        "`t` `m`, profile `claims`: 2 seeds read again 2 times under the same settings at a1, b2: identical results"
    ]
    assert log_reproductions(relabel(log[:2] + log[4:])) == []  # nothing read twice under one setting


def test_a_ledger_row_shows_how_far_its_deciding_reads_moved_when_read_again(reports):  # noqa: F811
    """The row's deciding reads (at each run's evaluation commit, with its result) and the reads of the same settings
    at other commits: their differences go beside the row's read count; identical repeats say so."""
    row = Ledger(reports, profile="cpu").decide(claim("strong", pair("good", "base", task="p")))
    assert row.verdict == SUPPORTED and len(row.runs) == 2

    deciding = [run_read(r, data="d") for r in row.runs]
    good, base = row.runs if row.runs[0].model == "good" else row.runs[::-1]
    moved = {"test_accuracy": read_result(good.test)["test_accuracy"] - 0.0125}
    later = [run_read(good, result=moved, commit="f" * 40, data="d"), run_read(base, commit="f" * 40, data="d")]
    log = relabel(deciding + later)

    (annotated,) = annotate_reads([copy.deepcopy(row)], log)
    assert annotated.reads == (
        "good: 1 read of the test split per seed; the same settings read again for 1 of 1 run (1 read): results "
        "differ from the deciding read's by -0.0125; "
        "base: 1 read of the test split per seed; the same settings read again for 1 of 1 run (1 read): identical "
        "results"
    )
    (alone,) = annotate_reads([copy.deepcopy(row)], relabel(deciding))
    assert "read again" not in alone.reads
