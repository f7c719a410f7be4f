"""The ledger on hand-made metrics files with known answers: one claim of each verdict, and a pair of models that
differ by less than their interval, which must not be called different."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from swarmlab.drive.report.claims import Claim
from swarmlab.drive.report.ledger import (
    BELOW_BUDGET,
    CONTRADICTED,
    INCONCLUSIVE,
    SHOWN,
    SUPPORTED,
    UNTESTABLE,
    Ledger,
    apply_fdr,
    annotate_tuning,
    plan_seeds,
    set_aside_exploratory,
)
from swarmlab.drive.report.render import (
    HOW_HEADER,
    STALE_UNKNOWN,
    headline,
    how_table,
    ledger_table,
    track_paragraph,
)
from swarmlab.drive.report.testsplit import ITEMS, read_result


def correct(n: int, k: int, seed: int = 0) -> np.ndarray:
    """n items, k of them correct, in a seeded order."""
    x = np.r_[np.ones(k), np.zeros(n - k)]
    np.random.default_rng(seed).shuffle(x)
    return x


def write_task(reports: Path, task: str, runs: dict[str, dict[int, np.ndarray]]):
    """New-layout metrics (run names, model and seed in each entry) and per-item scores for each (model, seed)."""
    ev, tr = {}, {}
    (reports / "evaluate" / task / ITEMS).mkdir(parents=True, exist_ok=True)
    (reports / "train" / task).mkdir(parents=True, exist_ok=True)
    for model, seeds in runs.items():
        for seed, items in seeds.items():
            name = f"{model}-seed{seed}"
            ev[name] = {
                "model": model,
                "seed": seed,
                "test_accuracy": float(items.mean()),
                "test_rows": len(items),
                "num_params": 1000,
                "device": "cpu",
                "git_commit": "0123456789abcdef" * 2 + "01234567",
            }
            tr[name] = {"model": model, "seed": seed, "steps": 100, "train_time_s": 10.0, "stopped": "max_steps"}
            np.savez(reports / "evaluate" / task / ITEMS / f"{name}.npz", accuracy=items, batch_latency_ms=np.ones(3))
    (reports / "evaluate" / task / "metrics.json").write_text(json.dumps(ev))
    (reports / "train" / task / "metrics.json").write_text(json.dumps(tr))


def claim(cid: str, decided_by: dict, paper_profile: str = "paper") -> Claim:
    return Claim(
        id=cid,
        paper_id="000",
        section="§1",
        words="words",
        metric=decided_by.get("metric", "m"),
        paper={},
        paper_profile=paper_profile,
        decided_by=decided_by,
    )


def threshold(value, op=">=", model="small", task="t"):
    return {"kind": "threshold", "task": task, "model": model, "metric": "test_accuracy", "op": op, "value": value}


def pair(a, b, direction="a_higher", task="t", **kw):
    return {
        "kind": "pairwise",
        "task": task,
        "a": a,
        "b": b,
        "metric": "test_accuracy",
        "direction": direction,
        "protocol": "equal steps",
        **kw,
    }


@pytest.fixture
def reports(tmp_path):
    reports = tmp_path / "reports"
    write_task(
        reports,
        "t",
        {
            "small": {0: correct(1000, 800)},  # 0.80, interval about +-0.025
            "close_a": {0: correct(200, 150, seed=1)},  # 0.750 ...
            "close_b": {0: correct(200, 148, seed=2)},  # ... vs 0.740: 2 items apart out of 200
        },
    )
    shared = correct(400, 200, seed=3)
    better = shared.copy()
    better[np.flatnonzero(shared == 0)[:80]] = 1  # the same items, 80 more right: a clear paired gain
    write_task(reports, "p", {"good": {0: better}, "base": {0: shared}})
    write_task(
        reports,
        "s",
        {
            "x": {s: correct(300, 240 + 3 * s, seed=s) for s in range(3)},
            "y": {s: correct(300, 180 + 3 * s, seed=10 + s) for s in range(3)},
        },
    )
    (reports / "sample" / "img" / "m-seed0").mkdir(parents=True)
    (reports / "sample" / "img" / "m-seed0" / "samples.png").write_bytes(b"png")
    return reports


def decide(reports, c: Claim, profile="cpu") -> object:
    return Ledger(reports, profile=profile).decide(c)


def run_read(r, *, result=None, commit=None, data=None, **extra) -> dict:
    """The test-read log's line for run ``r`` of a ledger (``testsplit.log_line``): its own result and evaluation
    commit unless given, at lr 1e-3; ``extra``: ``experiment``, ``grid``..."""
    from swarmlab.drive.report.testsplit import log_line, read_entry

    entry = read_entry(
        task=r.task,
        registered=r.task,
        options={},
        model=r.model,
        overrides={},
        seed=r.seed,
        train={"lr": 1e-3},
        run=f"{r.model}-seed{r.seed}",
        profile="cpu",
        commit=commit or r.provenance.commit,
    )
    return log_line(
        entry,
        task=r.task,
        registered=r.task,
        options={},
        data_fingerprint=data,
        overrides={},
        where=f"reports/evaluate/{r.task}",
        result=read_result(r.test) if result is None else result,
        **extra,
    )


def test_one_claim_of_each_verdict(reports):
    assert decide(reports, claim("sup", threshold(0.70))).verdict == SUPPORTED
    inc = decide(reports, claim("inc", threshold(0.80)))
    assert inc.verdict == INCONCLUSIVE and inc.lo < 0.80 < inc.hi
    below = decide(reports, claim("below", threshold(0.90)))  # excluded, at the cpu profile vs the paper's
    assert below.verdict == BELOW_BUDGET and "below the paper's budget" in below.why
    contra = decide(reports, claim("contra", threshold(0.90), paper_profile="cpu"))  # excluded at the paper's budget
    assert contra.verdict == CONTRADICTED
    missing = decide(reports, claim("none", threshold(0.5, model="big")))
    assert missing.verdict == UNTESTABLE and "no run of big" in missing.why
    shown = decide(reports, claim("fig", {"kind": "figure", "task": "img", "glob": "sample/img/*/samples.png"}))
    assert shown.verdict == SHOWN and shown.figures == ["sample/img/m-seed0/samples.png"]
    untestable = decide(reports, claim("u", {"kind": "untestable", "reason": "no data", "command": "get data"}))
    assert untestable.verdict == UNTESTABLE and "get data" in untestable.why
    gpu = decide(reports, Claim(**{**claim("gpu", threshold(0.5)).__dict__, "requires": "cuda"}))
    assert gpu.verdict == UNTESTABLE and "needs a GPU" in gpu.why


def test_a_pair_closer_than_its_interval_is_not_called_different(reports):
    for direction in ("a_higher", "a_lower"):
        row = decide(reports, claim("close", pair("close_a", "close_b", direction), paper_profile="cpu"))
        assert row.verdict == INCONCLUSIVE, row.why
        assert row.lo < 0 < row.hi and "no significant difference" in row.why and "paired bootstrap" in row.test
        assert row.value == pytest.approx(0.01)


def test_a_paired_gain_is_supported_and_its_opposite_contradicted_only_at_the_paper_budget(reports):
    row = decide(reports, claim("gain", pair("good", "base", task="p")))
    assert row.verdict == SUPPORTED and row.lo > 0 and "paired bootstrap over 400 shared test items" in row.test
    assert decide(reports, claim("loss", pair("good", "base", "a_lower", task="p"))).verdict == BELOW_BUDGET
    assert (
        decide(reports, claim("loss", pair("good", "base", "a_lower", task="p"), paper_profile="cpu")).verdict
        == CONTRADICTED
    )
    eq = decide(reports, claim("eq", pair("close_a", "close_b", "equal", margin=0.5)))
    assert eq.verdict == SUPPORTED  # |diff| interval well within 0.5


def test_several_seeds_use_a_t_interval_and_a_paired_test_across_seeds(reports):
    one = decide(reports, claim("x", threshold(0.7, model="x", task="s")))
    assert one.seeds == 3 and one.test == "t-interval across 3 seeds" and one.verdict == SUPPORTED
    two = decide(reports, claim("xy", pair("x", "y", task="s")))
    assert two.seeds == 3 and two.test == "paired t-test across 3 matched seeds" and two.verdict == SUPPORTED


def test_the_table_and_paragraph_come_from_the_rows(reports):
    rows = [decide(reports, claim("sup", threshold(0.70))), decide(reports, claim("close", pair("close_a", "close_b")))]
    apply_fdr(rows)
    table = ledger_table(rows)
    assert table.header == ["claim", "paper", "ours (95% interval)", "verdict", "p", "q"]  # the first screen
    assert [r[3] for r in table.rows] == ["**supported**", "**inconclusive**"]
    assert all("[" in r[2] for r in table.rows)  # every number of ours carries its interval
    assert all(r[4] != "—" and r[5] != "—" for r in table.rows)  # both are tests: p and q shown
    text = track_paragraph("000", rows).text
    assert "2 claims: 1 supported, 1 inconclusive" in text and "`close` is inconclusive" in text
    assert "**2 claims: 1 supported, 1 inconclusive.** 2 are decided by a test with a p-value (2 distinct" in (
        headline(rows).text
    )
    how = how_table(rows)
    assert len(how.rows) == 2 and all("evaluated at 0123456" in r[5] for r in how.rows)  # each side's provenance
    assert "stale" not in headline(rows).text
    rows[0].stale = "code changed since 0123456 (models): rerun `dvc repro evaluate@t`"
    assert [r[3] for r in ledger_table(rows).rows] == ["**supported** · stale", "**inconclusive**"]
    assert "**1 of the 2 rows with numbers of ours rest on stale results**" in headline(rows).text
    assert how_table(rows).rows[0][-1] == "**stale**: " + rows[0].stale  # the piece to rerun, in the second table


def test_legacy_metrics_keyed_by_model_are_read_with_the_params_seed(tmp_path):
    reports = tmp_path / "reports"
    (reports / "evaluate" / "t").mkdir(parents=True)
    (reports / "evaluate" / "t" / "metrics.json").write_text(
        json.dumps({"small": {"test_accuracy": 0.75, "test_rows": 400}})
    )
    row = Ledger(reports, profile="cpu", default_seed=7).decide(claim("legacy", threshold(0.5)))
    assert row.verdict == SUPPORTED and "rebuilt from the accuracy count" in row.test
    legacy_pair = Ledger(reports, profile="cpu").decide(claim("lp", pair("small", "small")))
    assert "unpaired bootstrap" in legacy_pair.test  # rebuilt items cannot be paired


# 000 §9.5's claim as a best_of over a t_local grid: the paper's best points are 3 and 4
BEST_T_LOCAL = {
    "kind": "best_of",
    "grid": "t_local",
    "metric": "test_accuracy",
    "mode": "max",
    "best": ["t_local=3", "t_local=4"],
}


def write_grid(
    reports: Path,
    grid: str,
    points: dict[str, dict[int, float]],
    model: str = "small",
    val: dict[str, dict[int, float]] | None = None,
):
    """An ablation grid's results.json: per point label, per seed, a test accuracy (the claims profile's seeds) and
    a validation accuracy (``val``; the test accuracy where not given)."""
    entries = []
    for label, seeds in points.items():
        ev = {
            f"{model}-seed{s}": {"model": model, "seed": s, "test_accuracy": acc, "num_params": 10}
            for s, acc in seeds.items()
        }
        vals = (val or {}).get(label, seeds)
        entries.append(
            {
                "point": label.replace("=", "_"),
                "label": label,
                "status": "ok",
                "evaluate": ev,
                "train": {
                    k: {"model": model, "seed": v["seed"], "steps": 2000, "val_accuracy": vals[v["seed"]]}
                    for k, v in ev.items()
                },
            }
        )
    (reports / "ablations" / grid).mkdir(parents=True)
    (reports / "ablations" / grid / "results.json").write_text(
        json.dumps({"task": "imdb", "monitor": "accuracy", "mode": "max", "points": entries})
    )


def test_ablation_claims_use_matched_seeds_of_the_grid_points(tmp_path):
    reports = tmp_path / "reports"
    write_grid(
        reports,
        "augment",
        {"enabled=true": {0: 0.80, 1: 0.81, 2: 0.805}, "enabled=false": {0: 0.76, 1: 0.77, 2: 0.768}},
    )
    write_grid(
        reports,
        "t_local",
        {"t_local=1": {0: 0.70, 1: 0.71}, "t_local=3": {0: 0.75, 1: 0.76}, "t_local=4": {0: 0.74, 1: 0.745}},
    )
    gain = {
        "kind": "delta",
        "grid": "augment",
        "task": "imdb",
        "model": "small",
        "metric": "test_accuracy",
        "with": "enabled=true",
        "without": "enabled=false",
        "low": 0.03,
        "high": 0.05,
        "protocol": "equal steps",
    }
    row = decide(reports, claim("aug", gain))
    assert row.verdict == SUPPORTED and row.seeds == 3 and row.test == "paired t-test across 3 matched seeds"
    assert row.value == pytest.approx(0.039, abs=1e-9)
    big = decide(reports, claim("aug10", {**gain, "low": 0.10, "high": 0.12}))
    assert big.verdict == BELOW_BUDGET
    best = BEST_T_LOCAL
    row = decide(reports, claim("tl", best))
    assert row.verdict == SUPPORTED and "t_local=3 vs t_local=1" in row.ours
    assert row.budget == "3 points, each 2,000 steps"  # the grid's budget, not a blank
    missing = decide(reports, claim("cs", {**best, "grid": "cluster_size"}))
    assert missing.verdict == UNTESTABLE and "`python -m pipelines.ablate --grid cluster_size --resume`" in missing.why
    pair_grid = {
        "kind": "pairwise",
        "grid": "t_local",
        "task": "imdb",
        "a": "t_local=4",
        "b": "t_local=3",
        "metric": "test_accuracy",
        "direction": "a_not_worse",
        "margin": 0.001,
        "protocol": "equal steps",
    }
    assert decide(reports, claim("pg", pair_grid)).verdict in (INCONCLUSIVE, BELOW_BUDGET)


def test_the_claims_profile_s_reports_come_first_and_the_pipeline_s_fill_in(reports):
    from swarmlab.drive.report.ledger import decide_across

    claims_dir = reports / "claims"
    write_task(claims_dir, "t", {"small": {0: correct(1000, 900), 1: correct(1000, 905, seed=1)}})
    ledgers = [
        Ledger(
            claims_dir,
            profile="claims",
            source="reports/claims",
            root=reports,
            rerun="bash scripts/claims.sh task {task}",
            rerun_grid="bash scripts/claims.sh grid {grid}",
            params_prefix="profiles.claims.",
        ),
        Ledger(reports, profile="cpu"),
    ]
    row = decide_across(claim("acc", threshold(0.85), paper_profile="claims"), ledgers)
    assert row.profile == "claims" and row.source == "reports/claims" and row.seeds == 2 and row.verdict == SUPPORTED
    gain = decide_across(claim("gain", pair("good", "base", task="p")), ledgers)  # only the pipeline ran task p
    assert gain.profile == "cpu" and gain.source == "" and gain.verdict == SUPPORTED
    none = decide_across(claim("none", threshold(0.5, model="big")), ledgers)
    assert none.verdict == UNTESTABLE and "reports/claims: no run of big" in none.why
    # each folder says how its own results are made: the claims pieces through scripts/claims.sh and their profile
    cpu_why, claims_why = none.why.split(" · reports/claims: ")
    assert "add it to profiles.claims.tasks.t.models" in claims_why and "`bash scripts/claims.sh task t`" in claims_why
    assert "add it to tasks.t.models" in cpu_why and "`dvc repro evaluate@t`" in cpu_why
    grid = {"kind": "pairwise", "grid": "g", "task": "t", "a": "x=1", "b": "x=2", "metric": "test_accuracy"}
    grid_why = decide_across(claim("grid", {**grid, "direction": "a_higher"}), ledgers).why
    assert "reports/claims: the ablation was not run: `bash scripts/claims.sh grid g`" in grid_why
    # a grid that ran but left a point unfinished names the same command, which resumes it
    write_grid(claims_dir, "g", {"x=1": {0: 0.8, 1: 0.81}, "x=2": {0: 0.82, 1: 0.83}})
    res = json.loads((claims_dir / "ablations" / "g" / "results.json").read_text())
    res["points"][1]["status"] = "not run"
    (claims_dir / "ablations" / "g" / "results.json").write_text(json.dumps(res))
    grid_why = decide_across(claim("grid", {**grid, "direction": "a_higher"}), ledgers).why
    assert "point `x=2` of grid `g` has no result: `bash scripts/claims.sh grid g`" in grid_why


def test_a_ratio_read_from_a_side_table_says_whether_it_is_a_count_or_a_measurement(tmp_path):
    reports = tmp_path / "reports"
    (reports / "side").mkdir(parents=True)
    (reports / "side" / "cost.txt").write_text(
        "CPU: test\n\n| model | L | forward MFLOP / seq |\n|---|---:|---:|\n"
        "| new | 256 | 1,800.0 |\n| old | 256 | 1,000.0 |\n| new | 1024 | 9,000.0 |\n\n"
        "## Timing\n\n| model | L | train ms |\n|---|---:|---:|\n| new | 256 | 30 |\n| old | 256 | 60 |\n"
    )  # two tables of the same rows: each field is read from the table that has its column
    flops = {
        "kind": "ratio",
        "source": "table",
        "path": "side/cost.txt",
        "op": "<",
        "value": 1.0,
        "count": True,
        "numerator": {"model": "new", "tokens": 256, "field": "forward MFLOP / seq"},
        "denominator": {"model": "old", "tokens": 256, "field": "forward MFLOP / seq"},
    }
    fewer = decide(reports, claim("flops", flops, paper_profile="cpu"))  # 1.8 < 1 is false, at the paper's profile
    assert fewer.verdict == CONTRADICTED and fewer.value == pytest.approx(1.8)
    assert fewer.test == "a count (exact)" and fewer.why.startswith("a count, exact: 1.8")
    timing = {**flops, "count": False, "numerator": {**flops["numerator"], "field": "train ms"}}
    timing["denominator"] = {**flops["denominator"], "field": "train ms"}
    faster = decide(reports, claim("fast", timing, paper_profile="cpu"))  # 30 / 60 = 0.5 < 1
    assert faster.verdict == SUPPORTED and faster.test == "one benchmark measurement"
    assert not faster.stale_known and how_table([faster]).rows[0][-1] == STALE_UNKNOWN  # no code record
    absent = {**flops, "numerator": {**flops["numerator"], "tokens": 4096}}
    row = decide(reports, claim("absent", absent, paper_profile="cpu"))
    assert row.verdict == UNTESTABLE and "no row new at L = 4096" in row.why
    nowhere = {**flops, "numerator": {**flops["numerator"], "field": "memory MB"}}
    row = decide(reports, claim("nowhere", nowhere, paper_profile="cpu"))
    assert row.verdict == UNTESTABLE and "no number in column 'memory MB' for new at L = 256" in row.why


def test_best_of_picks_its_points_on_validation_never_on_test(tmp_path):
    """The points a best_of claim tests are the best on validation: here t_local=4 leads on validation and t_local=3
    on test; the row must test t_local=4 (and t_local=2, the best other point on validation, not t_local=1)."""
    reports = tmp_path / "reports"
    write_grid(
        reports,
        "t_local",
        {
            "t_local=1": {0: 0.72, 1: 0.73},
            "t_local=2": {0: 0.70, 1: 0.71},
            "t_local=3": {0: 0.76, 1: 0.77},
            "t_local=4": {0: 0.74, 1: 0.745},
        },
        val={
            "t_local=1": {0: 0.60, 1: 0.61},
            "t_local=2": {0: 0.65, 1: 0.66},
            "t_local=3": {0: 0.62, 1: 0.63},
            "t_local=4": {0: 0.70, 1: 0.71},
        },
    )
    best = BEST_T_LOCAL
    row = decide(reports, claim("tl", best))
    assert row.ours.startswith("t_local=4 vs t_local=2"), row.ours
    assert "chosen on validation val_accuracy" in row.why


def seeds_pair(reports: Path, task: str, a: list[float], b: list[float]):
    """Two models with matched seeds whose per-seed test accuracies are ``a`` and ``b`` (items of 1,000)."""
    write_task(
        reports,
        task,
        {
            "a": {s: correct(1000, round(v * 1000), seed=s) for s, v in enumerate(a)},
            "b": {s: correct(1000, round(v * 1000), seed=20 + s) for s, v in enumerate(b)},
        },
    )


def test_a_p_of_004_among_null_pairs_is_not_called_after_the_fdr_control(tmp_path):
    """A 3-seed pair at p ~ 0.04 is "supported" alone; among 9 null pairs, Benjamini–Hochberg leaves it uncalled."""
    reports = tmp_path / "reports"
    seeds_pair(reports, "hit", [0.800, 0.850, 0.900], [0.760, 0.790, 0.870])  # diffs 0.040, 0.060, 0.030
    claims = [claim("hit", pair("a", "b", task="hit"))]
    for k in range(9):  # nothing to find: the same accuracies up to item noise
        seeds_pair(reports, f"null{k}", [0.80, 0.81, 0.82], [0.80 + 0.004 * (k % 3 - 1), 0.81, 0.821])
        claims.append(claim(f"null{k}", pair("a", "b", task=f"null{k}")))
    ledger = Ledger(reports, profile="cpu")
    alone = ledger.decide(claims[0])
    assert alone.verdict == SUPPORTED and 0.01 < alone.p < 0.05, alone.p
    rows = apply_fdr([ledger.decide(c) for c in claims])
    hit = rows[0]
    assert hit.verdict == INCONCLUSIVE and hit.before_fdr == SUPPORTED and hit.q >= 0.05
    assert "Benjamini–Hochberg across the 10 tested claims" in hit.why
    assert hit.q > hit.p  # Benjamini–Hochberg: a q is never below its p
    assert all(r.q is not None for r in rows)


def test_a_strong_effect_survives_the_fdr_control(reports):
    strong = Ledger(reports, profile="cpu").decide(claim("strong", pair("good", "base", task="p")))
    (row,) = apply_fdr([strong])
    assert row.verdict == SUPPORTED and row.q == pytest.approx(row.p) and row.q < 0.05


def test_numbers_from_an_exploratory_read_decide_no_claim(reports):
    """`dvc exp run -S train.lr=...` may read a test split again (testsplit.check_reads): a row whose numbers come
    from such a read keeps them but is not decided, and names the experiment; the same numbers from an ordinary
    read decide."""
    strong = Ledger(reports, profile="cpu").decide(claim("strong", pair("good", "base", task="p")))
    assert strong.verdict == SUPPORTED and strong.runs

    def log(experiment=None):
        lines = []
        for r in strong.runs:
            extra = {"experiment": experiment} if experiment and r.model == "good" else {}
            lines.append({**run_read(r, **extra), "kind": "re-read" if extra else "first"})
        return lines

    (ordinary,) = set_aside_exploratory([strong], log())
    assert ordinary is strong
    (row,) = set_aside_exploratory([strong], log("forte-noil"))
    assert row.verdict == UNTESTABLE and row.found and row.ours == strong.ours
    assert "exploratory read" in row.why and "forte-noil" in row.why
    (row,) = apply_fdr([row])
    assert row.q is None  # outside the tested family


def test_each_row_says_how_each_side_was_tuned_and_a_side_that_did_not_learn_decides_nothing(tmp_path):
    """#37: the row states each side's tuning (its training's record; pinned before runs recorded it), flags a swept
    side against a pinned one, and a side whose sweep stayed at chance leaves the row undecided, numbers kept."""
    reports = tmp_path / "reports"
    seeds_pair(reports, "p", [0.90, 0.91, 0.92], [0.70, 0.71, 0.72])
    c = claim("tuned", pair("a", "b", task="p"))
    (row,) = annotate_tuning([Ledger(reports, profile="cpu").decide(c)])
    assert row.verdict == SUPPORTED and row.tuning == "a: pinned; b: pinned"
    assert how_table([row]).rows[0][HOW_HEADER.index("settings chosen (each side)")] == row.tuning

    metrics = reports / "train" / "p" / "metrics.json"
    entries = json.loads(metrics.read_text())
    swept = "sweep s1: 8 trials of 200 steps, chosen on validation: lr=0.001"
    for entry in entries.values():
        entry["tuning"] = swept if entry["model"] == "a" else "pinned"
    metrics.write_text(json.dumps(entries))
    (row,) = annotate_tuning([Ledger(reports, profile="cpu").decide(c)])
    assert row.verdict == SUPPORTED and row.tuning == f"**tuned against untuned**: a: {swept}; b: pinned"

    for entry in entries.values():
        entry["tuning"] = "sweep s1: 8 trials of 200 steps; did not learn at this budget: best ... (pinned settings)"
    metrics.write_text(json.dumps(entries))
    (row,) = annotate_tuning([Ledger(reports, profile="cpu").decide(c)])
    assert row.verdict == UNTESTABLE and row.found and row.ours.startswith("a 0.9100 vs b 0.7100")
    assert row.why == "not decided: a, b did not learn at this budget (its sweep)" and "did not learn" in row.tuning


def test_a_result_from_a_commit_not_in_the_history_is_refused_in_one_line(reports):
    """The planted runs record commit 0123456…; a history that does not hold it refuses them (the row falls to "not
    testable here" and says why in one line), a history that does lets the same numbers decide."""
    c = claim("sup", threshold(0.70))
    refused = Ledger(reports, profile="cpu", known=lambda sha: False).decide(c)
    assert refused.verdict == UNTESTABLE and not refused.found
    assert "refused: small-seed0 made at 0123456, not in this repository's history" in refused.why
    assert "\n" not in refused.why
    ok = Ledger(reports, profile="cpu", known=lambda sha: sha.startswith("0123456")).decide(c)
    assert ok.verdict == SUPPORTED and "evaluated at 0123456" in ok.provenance


def test_code_that_differed_from_its_commit_and_different_training_code_are_flagged(tmp_path):
    reports = tmp_path / "reports"
    seeds_pair(reports, "t", [0.8, 0.81, 0.82], [0.7, 0.71, 0.72])
    ev_path, tr_path = reports / "evaluate" / "t" / "metrics.json", reports / "train" / "t" / "metrics.json"
    ev, tr = json.loads(ev_path.read_text()), json.loads(tr_path.read_text())
    for name, entry in tr.items():
        entry.update(git_commit="0123456789abcdef" * 2 + "01234567", code="aaaa" if name.startswith("a-") else "bbbb")
    tr_path.write_text(json.dumps(tr))
    known = lambda sha: True  # noqa: E731
    row = Ledger(reports, profile="cpu", known=known).decide(claim("ab", pair("a", "b")))
    assert row.verdict == SUPPORTED and "**the sides were trained at different code**" in row.provenance
    ev["a-seed1"]["git_commit"] += "-dirty"
    ev_path.write_text(json.dumps(ev))
    dirty = Ledger(reports, profile="cpu", known=known).decide(claim("ab", pair("a", "b")))
    assert dirty.verdict == SUPPORTED and "0123456 (code differed from it)" in dirty.provenance  # shown, not refused


def test_runs_trained_at_different_precision_decide_nothing(tmp_path):
    """Runs with bf16 autocast on beside runs with it off ran on different CPU classes (native bf16 or not): under
    equal net time that is unequal compute, so the row keeps its numbers and decides nothing. One precision on every
    run, or records without the field, decide as before."""
    reports = tmp_path / "reports"
    seeds_pair(reports, "t", [0.8, 0.81, 0.82], [0.7, 0.71, 0.72])
    tr_path = reports / "train" / "t" / "metrics.json"
    tr = json.loads(tr_path.read_text())
    c = claim("ab", pair("a", "b", task="t"))
    for flag in (True, False):
        for entry in tr.values():
            entry["bf16_autocast"] = flag
        tr_path.write_text(json.dumps(tr))
        assert Ledger(reports, profile="cpu").decide(c).verdict == SUPPORTED
    tr["b-seed2"]["bf16_autocast"] = True  # one seed of b resumed on the other machine class
    del tr["a-seed0"]["bf16_autocast"]  # an older record: not counted
    tr_path.write_text(json.dumps(tr))
    row = Ledger(reports, profile="cpu").decide(c)
    assert row.verdict == UNTESTABLE and row.found and row.ours.startswith("a 0.8100 vs b 0.7100")
    assert row.why == (
        "not decided: its runs trained at different precision, bf16 autocast on for b (seed 2) and off for a (seed 1, "
        "2), b (seed 0, 1): they ran on different CPU classes, so equal net time was not equal compute; rerun them on "
        "one machine class"
    )


def test_a_model_at_chance_on_every_seed_decides_nothing_and_a_flat_search_picks_no_setting(tmp_path):
    """A side whose every seed predicts one class (the same validation accuracy on each) did not learn: the row is
    not decided. A tuning grid that left a model at chance at every candidate is named in the row: no pick."""
    reports = tmp_path / "reports"
    seeds_pair(reports, "t", [0.34, 0.33, 0.335], [0.157, 0.157, 0.157])
    tr_path = reports / "train" / "t" / "metrics.json"
    tr = json.loads(tr_path.read_text())
    for name, entry in tr.items():
        entry["val_accuracy"] = 0.151 if name.startswith("b-") else 0.30 + 0.01 * entry["seed"]
    tr_path.write_text(json.dumps(tr))
    row = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t")))
    assert row.verdict == UNTESTABLE and row.why.startswith("not decided: b did not learn at this budget")
    # a tuning grid where a stays at one validation accuracy at every lr, b does not
    points = []
    for lr, (va, vb) in {"1e-4": (0.146, 0.20), "3e-4": (0.146, 0.25)}.items():
        points.append(
            {
                "label": f"lr={lr}",
                "status": "ok",
                "train": {
                    "a-seed0": {"model": "a", "seed": 0, "val_accuracy": va},
                    "b-seed0": {"model": "b", "seed": 0, "val_accuracy": vb},
                },
            }
        )
    (reports / "ablations" / "lrs").mkdir(parents=True)
    (reports / "ablations" / "lrs" / "results.json").write_text(json.dumps({"task": "t", "points": points}))
    for entry in tr.values():
        entry["val_accuracy"] = 0.30 + 0.01 * entry["seed"]  # both learned at full budget
    tr_path.write_text(json.dumps(tr))
    tuned = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t", tuning="lrs")))
    assert tuned.verdict == SUPPORTED
    assert "settings chosen on validation by grid `lrs` (2 points); the search left a (validation accuracy" in tuned.why
    assert "b (validation" not in tuned.why


def test_a_claim_tuned_by_its_sweep_names_the_sweep_stage_not_a_grid(tmp_path):
    """``decided_by.tuning: sweep`` is the claims sweep of the claim's task (claims/dvc.yaml sweep@<task>), not a grid
    named "sweep": the row names the stage, and says so when its results are missing."""
    reports = tmp_path / "reports"
    seeds_pair(reports, "t", [0.34, 0.33, 0.335], [0.30, 0.29, 0.295])
    missing = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t", tuning="sweep")))
    assert "settings chosen by `sweep@t`, whose results are missing here" in missing.why
    assert "grid" not in missing.why
    (reports / "sweep" / "t").mkdir(parents=True)
    (reports / "sweep" / "t" / "chosen.json").write_text(json.dumps({"task": "t", "models": {}}))
    # runs trained before the sweep (no tuning recorded: pinned) are named, not passed off as its choice
    before = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t", tuning="sweep")))
    assert "settings to be chosen on validation by `sweep@t`, whose choice the runs here of a, b did not train" in (
        before.why
    )
    tr_path = reports / "train" / "t" / "metrics.json"
    tr = json.loads(tr_path.read_text())
    for entry in tr.values():
        entry["tuning"] = f"sweep abc123: trial 3 of 8 ({entry['model']})"
    tr_path.write_text(json.dumps(tr))
    swept = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t", tuning="sweep")))
    assert "settings chosen on validation by `sweep@t` (each side's trials: the settings column)" in swept.why
    assert "missing" not in swept.why and "grid" not in swept.why and "did not train" not in swept.why
    tr[next(k for k in tr if k.startswith("b-"))]["tuning"] = "pinned"
    tr_path.write_text(json.dumps(tr))
    half = Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t", tuning="sweep")))
    assert "the runs here of b did not train" in half.why


def test_the_seed_plan_comes_from_the_spread_and_a_ranking_gets_at_least_five(tmp_path):
    """The PMA grid's per-seed differences (-0.253, -0.232, -0.117; d = 2.7) need 4 seeds for 80% power; a model
    compared with two others on one task is a ranking: at least 5."""
    reports = tmp_path / "reports"
    write_task(
        reports,
        "t",
        {
            m: {s: correct(1000, round(v * 1000), seed=10 * i + s) for s, v in enumerate(vals)}
            for i, (m, vals) in enumerate(
                {"a": [0.700, 0.700, 0.700], "b": [0.447, 0.468, 0.583], "c": [0.60, 0.60, 0.60]}.items()
            )
        },
    )
    rows = plan_seeds(apply_fdr([Ledger(reports, profile="cpu").decide(claim("ab", pair("a", "b", task="t")))]))
    assert rows[0].seeds == 3 and rows[0].planned_seeds == 4
    ranking = [claim("ab", pair("a", "b", task="t")), claim("ac", pair("a", "c", task="t"))]
    rows = plan_seeds([Ledger(reports, profile="cpu").decide(c) for c in ranking])
    assert [r.planned_seeds for r in rows] == [5, 5]


def test_the_verdict_history_lists_what_moved_and_why(reports):
    from swarmlab.drive.report.render import history_blocks

    rows = apply_fdr([decide(reports, claim("sup", threshold(0.70))), decide(reports, claim("new", threshold(0.5)))])
    before = {
        "commit": "abc1234",
        "claims": {"sup": {"verdict": "inconclusive", "ours": "0.7"}, "gone": {"verdict": "supported"}},
    }
    heading, para, table = history_blocks(rows, before)
    assert heading.text == "Verdict history: before the protocols (abc1234) and now"
    assert (
        "1 of the 2 claims of abc1234 have another verdict now; 1 claims are new; 1 were replaced (`gone`)" in para.text
    )
    assert table.rows == [["`sup`", "inconclusive: 0.7", f"supported: {rows[0].ours}", "other numbers"]]
    assert history_blocks(rows, {}) == []


def test_a_side_run_made_through_side_run_is_stale_once_the_code_it_imported_changes(tmp_path):
    """scripts/side_run.py keeps a script's output and the sha256 of every repository file it imported; the ledger's
    row for a number read from that output is current until one of those files changes, then stale, naming the
    command that reruns it. The script runs for real, in a copy of the repository's layout."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "side_run.py", repo / "scripts" / "side_run.py")
    shutil.copytree(REPO_ROOT / "swarmlab", repo / "swarmlab", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "bench").mkdir()
    (repo / "bench" / "helper.py").write_text("NEW, OLD = 30, 60\n")
    (repo / "bench" / "cost.py").write_text(
        "import sys\nsys.path.insert(0, 'bench')\nimport helper\n"
        "print('| model | L | train ms |')\nprint('|---|---:|---:|')\n"
        "print(f'| new | 256 | {helper.NEW} |')\nprint(f'| old | 256 | {helper.OLD} |')\n"
    )
    out = "reports/side/cost/cost.txt"
    run = subprocess.run(
        [sys.executable, "scripts/side_run.py", "--out", out, "bench/cost.py"], cwd=repo, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    record = json.loads((repo / (out + ".code.json")).read_text())
    assert {"bench/cost.py", "bench/helper.py"} <= set(record["files"])  # the script and what it imported
    timing = {
        "kind": "ratio",
        "source": "table",
        "path": "side/cost/cost.txt",
        "op": "<",
        "value": 1.0,
        "numerator": {"model": "new", "tokens": 256, "field": "train ms"},
        "denominator": {"model": "old", "tokens": 256, "field": "train ms"},
    }
    row = decide(repo / "reports", claim("fast", timing, paper_profile="cpu"))
    assert row.verdict == SUPPORTED and row.stale_known and row.stale == ""
    (repo / "bench" / "helper.py").write_text("NEW, OLD = 30, 60  # edited\n")
    row = decide(repo / "reports", claim("fast", timing, paper_profile="cpu"))
    assert row.stale_known and row.stale == (
        "code changed since the side run at a commit not recorded (bench/helper.py): "
        f"rerun `python scripts/side_run.py --out {out} bench/cost.py`"
    )  # only the file that changed (not a git work tree here: no commit)
    # a script that fails writes nothing: the previous output and its record stay
    (repo / "bench" / "cost.py").write_text("raise SystemExit(3)\n")
    before = (repo / out).read_text()
    again = subprocess.run(
        [sys.executable, "scripts/side_run.py", "--out", out, "bench/cost.py"], cwd=repo, capture_output=True, text=True
    )
    assert again.returncode == 3 and (repo / out).read_text() == before
