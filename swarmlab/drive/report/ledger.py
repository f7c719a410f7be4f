"""The claims ledger: each claim of ``claims.yaml`` with a verdict computed from our metrics files.

Verdicts (docs/reports.md):

* **supported**: the 95% interval lies entirely on the claim's side (a threshold met by the interval's worse end; a
  pairwise difference whose interval excludes 0 in the claimed direction; an "equal" pair whose interval lies within
  the margin);
* **inconclusive**: the interval contains the claim's boundary: nothing is called different, or met;
* **not supported at this budget**: the interval excludes the claim, and our run is below the paper's budget (a
  profile other than the claim's ``paper_profile``, or a smaller stand-in model);
* **contradicted**: the interval excludes the claim at the paper's budget (for a pair: the opposite is significant);
* **not testable here**: with the reason and what would make it testable;
* **shown for judgement**: a figure claim whose figure exists (judged by eye, never by the code).

A call (supported, contradicted, not supported at this budget) made by a test with a p-value stands only when its
Benjamini–Hochberg q across every tested claim of the report is below ``ALPHA`` (``apply_fdr``): otherwise the row
is inconclusive and says what p alone would have called. A result made at a commit that is not in the repository's
history is refused (``Ledger(known=...)``): decisive runs run from committed code; one whose tracked files differed
from its commit says so in its provenance.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Callable

from swarmlab.drive.report import reproductions, reruns, side_code, stats
from swarmlab.drive.report.claims import Claim, models_of
from swarmlab.drive.report.provenance import Staleness, stage_of
from swarmlab.drive.report.results import RunResult, mean_of, read_task, runs_from
from swarmlab.drive.report.testsplit import ITEMS, headline, read_result, reads_for

SUPPORTED = "supported"
INCONCLUSIVE = "inconclusive"
BELOW_BUDGET = "not supported at this budget"
CONTRADICTED = "contradicted"
UNTESTABLE = "not testable here"
SHOWN = "shown for judgement"
VERDICTS = (SUPPORTED, INCONCLUSIVE, BELOW_BUDGET, CONTRADICTED, UNTESTABLE, SHOWN)
EXACT = ("num_params",)  # counts, not measurements: no interval needed
LOWER_IS_BETTER = ("loss", "bits_per_dim", "latency", "memory")
ALPHA = 0.05  # the false discovery rate the ledger's calls are held to (Benjamini–Hochberg across tested claims)
CALLS = (SUPPORTED, CONTRADICTED, BELOW_BUDGET)  # verdicts that say the interval excludes a boundary


@dataclasses.dataclass
class Row:
    """One line of the ledger."""

    claim: Claim
    verdict: str
    why: str  # how the verdict follows from the numbers, or why none could be computed
    ours: str = "—"  # "mean [lo, hi]" or the measured value
    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    seeds: int = 0
    test: str = ""
    budget: str = ""
    profile: str = ""
    provenance: str = ""
    stale: str = ""  # the staleness line of the number's stage, "" when current
    figures: list[str] = dataclasses.field(default_factory=list)
    found: bool = True  # False: no run, grid or figure of the claim's kind in this ledger's reports
    source: str = ""  # where the numbers were read, when not the pipeline's reports/
    compared: list[tuple[str, float, float, float]] = dataclasses.field(default_factory=list)  # (label, v, lo, hi)
    p: float | None = None  # two-sided p of the test the verdict rests on, against the claim's boundary
    q: float | None = None  # its Benjamini–Hochberg q across the report's tested claims (apply_fdr)
    family: int = 0  # how many distinct tests that q was controlled across
    before_fdr: str = ""  # the verdict p alone would have called, when the FDR control withheld it
    runs: list[RunResult] = dataclasses.field(default_factory=list, repr=False)  # the runs the numbers come from
    other: str = ""  # the other budget's result, where it tells another story (decide_across)
    stale_known: bool = True  # False: a result outside dvc.lock whose code could not be compared
    planned_seeds: int | None = None  # seeds for 80% power at the runs' seed-to-seed spread (plan_seeds)
    reads: str = ""  # how often each side's test split was read, and which read decides (annotate_reads)
    protocol: str = ""  # whether the claim's protocol is as frozen at its first read (swarmlab.drive.report.protocols)
    unamended: bool = False  # its protocol changed after its first read without an amendment
    tuning: str = ""  # how each side's settings were chosen (annotate_tuning): pinned, or its sweep's trials and budget


def fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.4f}" if a < 1 else f"{v:.3f}"


def _bare(metric: str) -> str:
    return metric[5:] if metric.startswith("test_") else metric


class Ledger:
    """Decides every claim against the metrics under ``reports``."""

    def __init__(
        self,
        reports: Path,
        *,
        profile: str,
        default_seed: int = 0,
        stale: dict[str, Staleness] | None = None,
        source: str = "",
        root: Path | None = None,
        rerun: str = reruns.STAGE,
        rerun_grid: str = reruns.GRID,
        params_prefix: str = "",
        known: Callable[[str], bool] | None = None,
        code_changes: Callable[[str, list[str]], list[str]] | None = None,
        pieces: tuple[set[str], dict[str, Staleness]] | None = None,
        piece_changes: Callable[[str, list[str]], list[str]] | None = None,
    ):
        self.reports, self.profile, self.default_seed = Path(reports), profile, default_seed
        # how this folder's results are made: the commands that rerun a task's stage and an ablation grid, and where
        # its task settings sit in params.yaml (the claims profile's pieces: claims/dvc.yaml, profiles.claims.tasks)
        self.rerun_template, self.rerun_grid, self.params_prefix = rerun, rerun_grid, params_prefix
        self.root = Path(root) if root is not None else self.reports  # figure paths are relative to the report's folder
        self.source = source  # how the report names this ledger's folder ("" = the pipeline's reports/)
        self.stale = stale or {}
        # whether a commit is in the repository's history (None: not checked, e.g. a work folder outside git)
        self.known = known
        # for results that dvc.lock does not track (reports/claims): which code their stages depend on changed since
        # the commit that made them (None: staleness comes from dvc.lock, self.stale)
        self.code_changes = code_changes
        # the claims pieces' DVC stages (claims/dvc.yaml): the stages claims/dvc.lock records, and which of them are
        # stale; a result whose piece DVC never ran falls back to code_changes (None: no claims/dvc.lock at all)
        self.pieces = pieces
        # which code a claims piece depends on (claims/dvc.lock's record of it) changed since a commit: a piece DVC
        # records as current may still show runs trained before such a change, when its rerun kept them
        self.piece_changes = piece_changes
        self._tasks: dict[str, list[RunResult]] = {}

    def runs(self, task: str) -> list[RunResult]:
        if task not in self._tasks:
            self._tasks[task] = read_task(self.reports, task, self.default_seed)
        return self._tasks[task]

    def rows(self, claims: list[Claim]) -> list[Row]:
        return [self.decide(c) for c in claims]

    # ----------------------------------------------------------------------------------------- deciding
    def decide(self, claim: Claim) -> Row:
        kind = claim.kind
        row = getattr(self, f"_{kind}")(claim)
        row.profile = row.profile or self.profile
        refused = self._refused(row.runs)
        if refused:  # the numbers are not used at all: the next folder (or "not testable") decides
            why = f"refused: {refused}; decisive runs run from committed code: rerun from a commit of main"
            return _undecided(row, why, found=False)
        if row.runs and row.verdict not in (UNTESTABLE, SHOWN):
            idle = self._did_not_learn(row.runs)
            if idle:
                return _undecided(row, f"not decided: {idle}", found=True)
            mixed = self._mixed_precision(row.runs)
            if mixed:
                return _undecided(row, f"not decided: {mixed}", found=True)
            row.why += self._tuning_note(claim, row.runs)
        if self.code_changes is not None and row.runs:
            piece = self._piece(claim, row.runs)
            if self.pieces is not None and piece in self.pieces[0]:
                row.stale = self._stale_of(piece, self.pieces[1]) or self._kept_stale(row.runs, piece)
            else:
                row.stale = self._code_stale(row.runs, piece)
        elif self.source and row.runs:  # outside dvc.lock, and nothing to compare the code with
            row.stale_known = False
        return row

    @staticmethod
    def _did_not_learn(runs: list[RunResult]) -> str:
        """Which model of the comparison stayed at chance on every seed (the same validation accuracy on each: a
        constant prediction), or "": a comparison with a model that did not learn says nothing about the model."""
        models: dict[str, list[float | None]] = {}
        for r in runs:
            models.setdefault(r.model, []).append(r.value("val_accuracy"))
        idle = [
            f"{m} did not learn at this budget (validation accuracy {fmt(v[0])} on each of its {len(v)} seeds: one "
            f"class, chance)"
            for m, v in models.items()
            if len(v) >= 2 and None not in v and len(set(v)) == 1
        ]
        return "; ".join(idle)

    @staticmethod
    def _mixed_precision(runs: list[RunResult]) -> str:
        """Why the runs of one comparison were not trained alike, or "": some with bf16 autocast and some without.
        The engine turns autocast on where the CPU has native bf16 (AVX-512 bf16 or AMX) and off elsewhere, so such
        runs ran on different CPU classes, at different precision and, under equal net time, at different step
        counts (about 2x apart). A piece resumed on another machine class shows here. Records without the field
        (older runs) are not counted."""
        flags: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        for r in runs:
            on = r.train.get("bf16_autocast")
            if isinstance(on, bool):
                flags[on].setdefault(r.model, []).append(r.seed)
        if not (flags[True] and flags[False]):
            return ""

        def side(d: dict[str, list[int]]) -> str:
            return ", ".join(f"{m} (seed {', '.join(map(str, sorted(s)))})" for m, s in sorted(d.items()))

        return (
            f"its runs trained at different precision, bf16 autocast on for {side(flags[True])} and off for "
            f"{side(flags[False])}: they ran on different CPU classes, so equal net time was not equal compute; "
            "rerun them on one machine class"
        )

    def _tuning_note(self, claim: Claim, runs: list[RunResult]) -> str:
        """How the compared models' settings were chosen (``decided_by.tuning``: the grid that chose them on
        validation, or ``sweep``: the claims sweep of the claim's task), and which model a grid left at chance at
        every candidate, so that its choice was no pick. A sweep's per-model outcome is in the runs' own records
        (``annotate_tuning``: the row's settings column, and "did not learn at this budget" there); a model whose
        runs here recorded no sweep (trained before it, or pinned) is named: its numbers are not the protocol's."""
        grid = claim.decided_by.get("tuning")
        if not grid:
            return ""
        if grid == "sweep":
            task = str(claim.decided_by.get("task"))
            if _json(self.reports / "sweep" / task / "chosen.json") is None:
                return f" · settings chosen by `sweep@{task}`, whose results are missing here"
            before = sorted({r.model for r in runs if not is_swept(run_tuning(r))})
            if before:
                return (
                    f" · settings to be chosen on validation by `sweep@{task}`, whose choice the runs here of "
                    f"{', '.join(before)} did not train (`bash scripts/claims.sh task {task}` trains it)"
                )
            return f" · settings chosen on validation by `sweep@{task}` (each side's trials: the settings column)"
        res = self._ablation(grid)
        if not res:
            return f" · settings chosen by grid `{grid}`, whose results are missing here"
        names = {m for k in ("a", "b", "model") if k in claim.decided_by for m in models_of(claim.decided_by[k])}
        flat = []
        for model in sorted(names):
            vals = [
                e.get("val_accuracy")
                for p in res.get("points") or []
                for e in (p.get("train") or {}).values()
                if isinstance(e, dict) and e.get("model") == model
            ]
            if len(vals) >= 2 and None not in vals and len(set(vals)) == 1:
                flat.append(f"{model} (validation accuracy {fmt(vals[0])} at every candidate)")
        note = f" · settings chosen on validation by grid `{grid}` ({len(res.get('points') or [])} points)"
        if flat:
            note += (
                "; the search left " + ", ".join(flat) + " at chance, so it picked no setting for it: its setting is "
                "the one its full-budget validation runs favour (params.yaml says which)"
            )
        return note

    @staticmethod
    def _piece(claim: Claim, runs: list[RunResult]) -> str:
        """The claims/dvc.yaml stage that makes a claim's numbers: its grid's, its samples', or its task's."""
        d = claim.decided_by
        if d.get("grid"):
            return f"grid@{d['grid']}"
        task = d.get("task") or runs[0].task
        return f"sample@{task}" if claim.kind == "figure" else f"task@{task}"

    @staticmethod
    def _changed_since(runs: list[RunResult], changes, commit_of, stages_of) -> tuple[str, str]:
        """(the commits, the code paths) where ``changes(commit, stages)`` finds code changed since a run's commit
        (``commit_of(run)``, runs without one skipped) among its stages' dependencies (``stages_of(run)``); ("", "")
        when none changed."""
        changed: dict[str, set[str]] = {}
        for r in runs:
            commit = commit_of(r)
            if commit:
                for path in changes(commit, stages_of(r)):
                    changed.setdefault(path, set()).add(commit[:7])
        if not changed:
            return "", ""
        return ", ".join(sorted(set().union(*changed.values()))), ", ".join(sorted(changed))

    def _code_stale(self, runs: list[RunResult], piece: str) -> str:
        """The staleness line of a result its DVC stage ``piece`` did not make (kept by scripts/claims.sh before the
        pieces were stages, so claims/dvc.lock has no entry): the code its train and evaluate stages depend on that
        changed since the commit each run was evaluated at, and the command that reruns it; "" when none changed."""
        since, paths = self._changed_since(
            runs, self.code_changes, lambda r: r.provenance.commit, lambda r: [f"train@{r.task}", f"evaluate@{r.task}"]
        )
        if not paths:
            return ""
        return (
            f"no claims/dvc.lock entry for `{piece}` (made before it was a DVC stage); code changed since {since} "
            f"({paths}): rerun `{reruns.CLAIMS_PIECE.format(piece=piece)}`"
        )

    def _kept_stale(self, runs: list[RunResult], piece: str) -> str:
        """The staleness line of runs a piece that DVC records as current did not train: trained at a commit before
        a change to code the piece depends on (claims/dvc.lock's deps of ``piece``), so a rerun of the piece kept
        them rather than training them again (a grid rerun through `dvc repro` alone resumes from every point its
        kept results mark done); "" when none."""
        if self.piece_changes is None:
            return ""
        since, paths = self._changed_since(
            runs, self.piece_changes, lambda r: r.train_provenance.commit, lambda r: [piece]
        )
        if not paths:
            return ""
        grid = piece.removeprefix("grid@") if piece.startswith("grid@") else ""
        rerun = reruns.CLAIMS_GRID.format(grid=grid) if grid else reruns.CLAIMS_PIECE.format(piece=piece)
        return (
            f"claims/dvc.lock records `{piece}` as current, but its runs were trained at {since}, before changes to "
            f"code it depends on ({paths}): a rerun kept them; rerun `{rerun}`"
            + (" (its --resume sends points made by other code through again)" if grid else "")
        )

    def _refused(self, runs: list[RunResult]) -> str:
        """Why the runs' numbers cannot decide a claim (no commit, or a commit not in the history), or "". A commit
        with ``-dirty`` (tracked files differed from it: `dvc exp run -S` rewrites params.yaml, so every DVC
        experiment's run has it) is shown in the row's provenance ("code differed from it"), not refused."""
        if self.known is None:
            return ""
        bad = {}
        for r in runs:
            for stage, prov in (("evaluated", r.provenance), ("trained", r.train_provenance)):
                if stage == "trained" and not prov.commit:
                    continue  # runs trained before the train record held its commit: the evaluation's decides
                if not prov.commit:
                    bad.setdefault("no commit recorded", set()).add(f"{r.run} ({stage})")
                elif not self.known(prov.commit):
                    bad.setdefault(f"{prov.commit[:7]}, not in this repository's history", set()).add(r.run)
        return "; ".join(f"{', '.join(sorted(v))} made at {k}" for k, v in sorted(bad.items()))

    @staticmethod
    def _sides(labelled: list[tuple[str, list[RunResult]]]) -> str:
        """Each side's training and evaluation commits, and a flag when the sides were trained at different code."""
        parts = []
        for label, runs in labelled:
            train = sorted({r.train_provenance.commit[:7] for r in runs if r.train_provenance.commit})
            ev = sorted({str(r.provenance).split(" ·")[0] for r in runs})
            parts.append(
                f"{label}: trained at {', '.join(train) or 'a commit not recorded'}, evaluated at {', '.join(ev)}"
            )
        codes = [{r.train.get("code") for r in runs} for _, runs in labelled]
        if len(labelled) > 1 and all(None not in c for c in codes) and len(set().union(*codes)) > 1:
            parts.append("**the sides were trained at different code**")
        return "; ".join(parts)

    def _at_paper_budget(self, claim: Claim, models_used: list[tuple[list[str], str]]) -> bool:
        return self.profile == claim.paper_profile and all(m == names[0] for names, m in models_used)

    @staticmethod
    def _excluded(at_paper: bool) -> str:
        """The verdict of a claim its interval excludes: contradicted only at the paper's budget."""
        return CONTRADICTED if at_paper else BELOW_BUDGET

    def _pick(self, task: str, names) -> tuple[str | None, list[RunResult]]:
        for name in models_of(names):
            runs = [r for r in self.runs(task) if r.model == name]
            if runs:
                return name, runs
        return None, []

    def skipped(self, task: str) -> str:
        """Why the active profile ran no model of ``task`` (its evaluate result says), or ""."""
        data = _json(self.reports / "evaluate" / task / "metrics.json")
        return str(data.get("skipped") or "") if isinstance(data, dict) else ""

    def _no_run(self, task: str, names: str, c: Claim) -> str:
        reason = self.skipped(task)
        if reason:
            return f"profile `{self.profile}` skips `{task}`: {reason}"
        return (
            f"no run of {names} on `{task}` at profile `{self.profile}`: add it to {self.params_prefix}tasks.{task}.models "
            f"(profile `{c.paper_profile}` has the paper's settings), {self._rerun('evaluate', task)}"
        )

    def _rerun(self, stage: str, task: str) -> str:
        return f"`{self.rerun_template.format(stage=stage, task=task)}`"

    def _stale_of(self, stage: str, stale: dict[str, Staleness] | None = None) -> str:
        s = (self.stale if stale is None else stale).get(stage)
        return str(s) if s else ""

    def _budget(self, runs: list[RunResult]) -> str:
        tr = runs[0].train if runs else {}
        parts = []
        if tr.get("steps") is not None:
            parts.append(f"{tr['steps']:,} steps")
        if tr.get("train_time_s") is not None:
            parts.append(f"{tr['train_time_s']:.0f} s net")
        if tr.get("stopped"):
            parts.append(f"stopped by {tr['stopped']}")
        return ", ".join(parts)

    def _interval(self, runs: list[RunResult], metric: str):
        """(Interval | None, why-not)."""
        name = _bare(metric)
        if metric in EXACT:
            v = runs[0].value(metric)
            if v is None:
                return None, f"no {metric} recorded"
            return stats.Interval(v, v, v, len(runs), "exact (a count)"), ""
        if len(runs) >= 2:
            values = [r.value(metric) for r in runs]
            if any(v is None for v in values):
                return None, f"a seed lacks {metric}"
            return stats.across_seeds(values), ""
        r = runs[0]
        if r.items is None:
            return None, (
                f"per-item scores were not saved by this run (written before evaluate@ saved them): "
                f"{self._rerun('evaluate', r.task)}"
            )
        try:
            iv = stats.bootstrap(r.items, name)
        except KeyError:
            return None, f"no per-item {name} in this run's items"
        if r.reconstructed:
            iv = dataclasses.replace(iv, test=iv.test + "; items rebuilt from the accuracy count")
        return iv, ""

    def _threshold(self, c: Claim) -> Row:
        d = c.decided_by
        model, runs = self._pick(d["task"], d["model"])
        if not runs:
            return Row(c, UNTESTABLE, self._no_run(d["task"], " or ".join(models_of(d["model"])), c), found=False)
        if c.requires == "cuda" and not str(runs[0].test.get("device", "")).startswith("cuda"):
            return Row(
                c,
                UNTESTABLE,
                f"needs a GPU: our run measured on `{runs[0].test.get('device', '?')}`",
                budget=self._budget(runs),
            )
        iv, why = self._interval(runs, d["metric"])
        base = dict(
            seeds=len(runs),
            budget=self._budget(runs),
            provenance=self._sides([(model, runs)]),
            stale=self._stale_of(stage_of("evaluate", d["task"])),
            runs=runs,
        )
        if iv is None:
            return Row(
                c, UNTESTABLE, f"`{model}` recorded {fmt(runs[0].value(d['metric']))} but no interval: {why}", **base
            )
        at_paper = self._at_paper_budget(c, [(models_of(d["model"]), model)])
        op, v = d["op"], d["value"]
        if op == "==":
            met, excluded = iv.lo <= v <= iv.hi, not (iv.lo <= v <= iv.hi)
        elif op in (">=", ">"):
            met = iv.lo >= v if op == ">=" else iv.lo > v
            excluded = iv.hi < v if op == ">=" else iv.hi <= v
        else:
            met = iv.hi <= v if op == "<=" else iv.hi < v
            excluded = iv.lo > v if op == "<=" else iv.lo >= v
        ours = f"{fmt(iv.value)} (exact)" if iv.lo == iv.hi else f"{fmt(iv.value)} [{fmt(iv.lo)}, {fmt(iv.hi)}]"
        if met:
            verdict, why = SUPPORTED, f"the interval's worse end meets {op} {fmt(v)}"
        elif excluded:
            verdict = self._excluded(at_paper)
            why = f"the interval excludes {op} {fmt(v)}" + (
                ""
                if at_paper
                else f" (`{model}` at profile `{self.profile}`, below the paper's budget: `{c.paper_profile}`)"
            )
        else:
            verdict, why = INCONCLUSIVE, f"the interval contains {fmt(v)}"
        return Row(
            c,
            verdict,
            why,
            ours=ours,
            value=iv.value,
            lo=iv.lo,
            hi=iv.hi,
            test=iv.test,
            compared=[(f"{model}", iv.value, iv.lo, iv.hi), ("paper", v, v, v)],
            p=iv.p_against(v) if op != "==" else None,  # "==" is met by an interval holding v: no test to call
            **base,
        )

    def _pairwise(self, c: Claim) -> Row:
        d = c.decided_by
        if d.get("grid"):  # two points of an ablation grid (their labels)
            a, b = models_of(d["a"])[0], models_of(d["b"])[0]
            ra, rb, why = self._grid_pair(d["grid"], a, b)
            if ra is None:
                return Row(c, UNTESTABLE, why, found=False)
        else:
            a, ra = self._pick(d["task"], d["a"])
            b, rb = self._pick(d["task"], d["b"])
        missing = [" or ".join(models_of(x)) for x, r in ((d["a"], ra), (d["b"], rb)) if not r]
        if missing:
            return Row(c, UNTESTABLE, self._no_run(d["task"], ", ".join(missing), c), found=False)
        metric = d["metric"]
        seeds = sorted({r.seed for r in ra} & {r.seed for r in rb})
        base = dict(
            seeds=len(seeds),
            budget=f"{d['protocol']}; " + self._budget(ra),
            provenance=self._sides([(a, ra), (b, rb)]),
            stale=self._stale_of(stage_of("evaluate", d["task"])),
            runs=ra + rb,
        )
        if not seeds:
            return Row(c, UNTESTABLE, f"`{a}` and `{b}` share no seed", **base)
        ra = [r for r in ra if r.seed in seeds]
        rb = [r for r in rb if r.seed in seeds]
        base["runs"] = ra + rb
        diff, why = self._difference(ra, rb, metric)
        if diff is None:
            va, vb = ra[0].value(metric), rb[0].value(metric)
            return Row(c, UNTESTABLE, f"recorded {a} {fmt(va)} vs {b} {fmt(vb)}, but no test: {why}", **base)
        at_paper = self._at_paper_budget(c, [(models_of(d["a"]), a), (models_of(d["b"]), b)])
        direction, margin = d["direction"], d.get("margin", 0.0)
        lo, hi = diff.lo, diff.hi
        if direction == "a_higher":
            met, opposite = lo > 0, hi < 0
            p = diff.p_against(0.0)
        elif direction == "a_lower":
            met, opposite = hi < 0, lo > 0
            p = diff.p_against(0.0)
        elif direction == "a_not_worse":
            met, opposite = lo > -margin, hi < -margin
            p = diff.p_against(-margin)
        else:  # equal within the margin: both bounds must be excluded to call it equal (two one-sided tests)
            met, opposite = (lo > -margin and hi < margin), (lo > margin or hi < -margin)
            p = _within(diff, -margin, margin, opposite)
        va, vb = (self._mean(ra, metric), self._mean(rb, metric))
        ours = f"{a} {fmt(va)} vs {b} {fmt(vb)}: Δ {fmt(diff.diff)} " + (
            "(exact)" if lo == hi else f"[{fmt(lo)}, {fmt(hi)}]"
        )
        shown_p = "exact" if diff.test.startswith("exact") else f"p = {diff.p:.3g}"
        wanted = {
            "a_higher": f"{a} > {b}",
            "a_lower": f"{a} < {b}",
            "a_not_worse": f"{a} ≥ {b} − {margin}",
            "equal": f"|{a} − {b}| < {margin}",
        }[direction]
        if met:
            verdict, why = SUPPORTED, f"the difference shows {wanted} ({shown_p})"
        elif opposite:
            verdict = self._excluded(at_paper)
            why = f"the difference excludes {wanted} ({shown_p})" + (
                "" if at_paper else f"; profile `{self.profile}` is below the paper's budget (`{c.paper_profile}`)"
            )
        else:
            verdict = INCONCLUSIVE
            why = (
                f"no significant difference: the interval [{fmt(lo)}, {fmt(hi)}] contains "
                f"{'0' if direction in ('a_higher', 'a_lower') else 'the margin'}; neither is called better"
            )
        boundary = {"a_higher": 0.0, "a_lower": 0.0, "a_not_worse": -margin}.get(
            direction, margin if diff.diff >= 0 else -margin
        )
        return Row(
            c,
            verdict,
            why,
            ours=ours,
            value=diff.diff,
            lo=lo,
            hi=hi,
            test=diff.test,
            compared=[(f"{a} − {b}", diff.diff, lo, hi)],
            p=p,
            planned_seeds=_plan(diff, boundary),
            **base,
        )

    @staticmethod
    def _mean(runs: list[RunResult], metric: str):
        return mean_of(runs, "latency_ms_mean" if metric == "latency_ms_per_batch" else metric)

    def _difference(self, ra: list[RunResult], rb: list[RunResult], metric: str):
        """(Difference | None, why-not) of a - b, matched by seed."""
        if metric in EXACT:
            va, vb = ra[0].value(metric), rb[0].value(metric)
            if va is None or vb is None:
                return None, f"no {metric} recorded"
            return stats.Difference(va - vb, va - vb, va - vb, 0.0 if va != vb else 1.0, 1, "exact (counts)"), ""
        if len(ra) >= 2:
            key = "latency_ms_mean" if metric == "latency_ms_per_batch" else metric
            va, vb = [r.value(key) for r in ra], [r.value(key) for r in rb]
            if any(v is None for v in va + vb):
                return None, f"a seed lacks {metric}"
            return stats.paired_seeds(va, vb), ""
        a, b = ra[0], rb[0]
        if metric == "latency_ms_per_batch":
            ia, ib = a.items or {}, b.items or {}
            if "batch_latency_ms" not in ia or "batch_latency_ms" not in ib:
                return None, f"one timing per run and no per-batch latencies saved: {self._rerun('evaluate', a.task)}"
            if len(ia["batch_latency_ms"]) != len(ib["batch_latency_ms"]):
                return None, "the two runs timed different batches: no paired test"
            return stats.paired_bootstrap({"t": ia["batch_latency_ms"]}, {"t": ib["batch_latency_ms"]}, "t"), ""
        if not metric.startswith("test_"):
            return (
                None,
                f"{metric} is one measurement per run: a test needs 2 or more seeds ({self.params_prefix}tasks.{a.task}.seeds)",
            )
        if a.items is None or b.items is None:
            return None, (
                f"per-item scores were not saved by these runs (written before evaluate@ saved them): "
                f"{self._rerun('evaluate', a.task)}"
            )
        name = _bare(metric)
        try:
            if a.reconstructed or b.reconstructed:
                return stats.unpaired_bootstrap(a.items, b.items, name), ""
            return stats.paired_bootstrap(a.items, b.items, name), ""
        except KeyError:
            return None, f"no per-item {name} in the runs' items"
        except ValueError as exc:
            return None, str(exc)

    def _ratio(self, c: Claim) -> Row:
        d = c.decided_by
        num, why = self._measure(d, d["numerator"])
        den, why2 = self._measure(d, d["denominator"]) if d.get("denominator") else (1.0, "")
        stage = "memory_scaling" if d["source"] == "memory_scaling" else ""
        if num is None or den is None:
            return Row(
                c,
                UNTESTABLE,
                why or why2,
                stale=self._stale_of(stage) if stage else "",
                found=not (why or why2).startswith("no "),
            )
        value, op, target = num / den, d["op"], d["value"]
        met = {
            ">=": value >= target,
            ">": value > target,
            "<=": value <= target,
            "<": value < target,
            "==": value == target,
        }[op]
        label = (
            f"{models_of(d['numerator']['model'])[0]} / {models_of(d['denominator']['model'])[0]}"
            if d.get("denominator")
            else models_of(d["numerator"]["model"])[0]
        )
        where = "reports/memory_scaling/results.json" if stage else f"reports/{d['path']} (side run, not a DVC output)"
        # a DVC stage's staleness comes from dvc.lock; a side run's from the code fingerprint it recorded
        known, stale = (
            (True, self._stale_of(stage))
            if stage
            else side_code.staleness(self.reports / d["path"], self.reports.parent)
        )
        verdict = SUPPORTED if met else self._excluded(self.profile == c.paper_profile)
        count = d.get("count", False)  # counts (FLOPs) are exact; timings and memory readings are one measurement
        why = (
            f"{'a count, exact' if count else 'one measurement per point (no interval)'}: {fmt(value)} {op} "
            f"{fmt(target)} is {'true' if met else 'false'} ({where})"
        )
        return Row(
            c,
            verdict,
            why,
            ours=f"{fmt(value)} ({'a count' if count else 'one measurement'})",
            value=value,
            test="a count (exact)" if count else "one benchmark measurement",
            budget=f"{d['numerator']['tokens']:,} tokens",
            stale=stale,
            stale_known=known,  # a side run made before side runs recorded their code: its staleness is unknown
            compared=[(label, value, value, value), ("paper", target, target, target)],
        )

    def _measure(self, d: dict, sel: dict):
        if d["source"] == "memory_scaling":
            path = self.reports / "memory_scaling" / "results.json"
            data = _json(path)
            if not data:
                return None, "no reports/memory_scaling/results.json: `dvc repro memory_scaling`"
            names = models_of(sel["model"])
            for name in names:
                for p in data.get("points") or []:
                    if p.get("model") == name and p.get("tokens") == sel["tokens"]:
                        if p.get("status") != "ok":
                            predicted = (
                                f"; its own prediction is {p['predicted_bytes'] / 1e9:,.1f} GB, not a measurement"
                                if isinstance(p.get("predicted_bytes"), (int, float))
                                and "predicted" not in str(p.get("message"))
                                else ""
                            )
                            return None, (
                                f"`{name}` at {sel['tokens']:,} tokens was not measured: "
                                f"{p.get('message') or p.get('status')}{predicted} (needs a machine with that "
                                f"memory)"
                            )
                        field = {"memory_gb": p.get("increment_bytes", 0) / 1e9, "time_s": p.get("time_s")}.get(
                            sel["field"]
                        )
                        return field, ""
            return None, f"`{names[0]}` at {sel['tokens']:,} tokens is not in the benchmark's grid"
        path = self.reports / d["path"]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None, f"no {path}"
        rows = [
            row
            for row in (dict(zip(header, cells)) for header, cells in _md_rows(text))
            if row.get("model") == sel["model"] and row.get("L") == str(sel["tokens"])
        ]
        if not rows:
            return None, f"no row {sel['model']} at L = {sel['tokens']} in {path}"
        # a file may hold several tables of the same models (counts, then timings): the first with the column
        cell = next((r[sel["field"]] for r in rows if sel["field"] in r), None)
        try:
            return float(cell.replace(",", "")), ""
        except (AttributeError, ValueError):  # no table with the column (None), or no number in it
            return None, f"no number in column {sel['field']!r} for {sel['model']} at L = {sel['tokens']} in {path}"

    def _ablation(self, grid: str):
        return _json(self.reports / "ablations" / grid / "results.json")

    def _point_runs(self, grid: str, res: dict, label: str, model: str | None = None):
        """(runs of one finished point, or None, why-not): its evaluate/train entries per seed, with the items the
        ablate command copied to ``reports/ablations/<grid>/items/<point>/``."""
        point = next((p for p in res.get("points") or [] if p.get("label") == label), None)
        if point is None or point.get("status") != "ok":
            return None, f"point `{label}` of grid `{grid}` has no result: `{self.rerun_grid.format(grid=grid)}`"
        runs = runs_from(
            res.get("task") or "",
            point.get("evaluate") or {},
            point.get("train") or {},
            self.reports / "ablations" / grid / ITEMS / point.get("point", ""),
            self.default_seed,
        )
        if model:
            runs = [r for r in runs if r.model == model] or runs
        return (runs or None), ("" if runs else f"point `{label}` of grid `{grid}` holds no metrics")

    def _grid_pair(self, grid: str, a: str, b: str, model: str | None = None):
        """Matched-seed runs of two points of an ablation grid: (ra, rb, why-not)."""
        res = self._ablation(grid)
        if not res:
            return None, None, f"the ablation was not run: `{self.rerun_grid.format(grid=grid)}`"
        ra, why = self._point_runs(grid, res, a, model)
        if ra is None:
            return None, None, why
        rb, why = self._point_runs(grid, res, b, model)
        if rb is None:
            return None, None, why
        seeds = sorted({r.seed for r in ra} & {r.seed for r in rb})
        if not seeds:
            return None, None, f"points `{a}` and `{b}` share no seed"
        return [r for r in ra if r.seed in seeds], [r for r in rb if r.seed in seeds], ""

    def _delta(self, c: Claim) -> Row:
        d = c.decided_by
        ra, rb, why = self._grid_pair(d["grid"], d["with"], d["without"], d["model"])
        if ra is None:
            return Row(c, UNTESTABLE, why, found=False)
        diff, why = self._difference(ra, rb, d["metric"])
        if diff is None:
            return Row(
                c,
                UNTESTABLE,
                f"recorded with {fmt(self._mean(ra, d['metric']))} vs without "
                f"{fmt(self._mean(rb, d['metric']))}, but no test: {why}",
                seeds=len(ra),
            )
        low, high = d["low"], d["high"]
        at_paper = self.profile == c.paper_profile
        ours = f"Δ {fmt(diff.diff)} [{fmt(diff.lo)}, {fmt(diff.hi)}]"
        p = _within(diff, low, high, diff.hi < low or diff.lo > high)
        if diff.lo >= low and diff.hi <= high:
            verdict, why = SUPPORTED, f"the gain's interval lies within [{low}, {high}]"
        elif diff.hi < low or diff.lo > high:
            verdict = self._excluded(at_paper)
            why = f"the gain's interval lies outside [{low}, {high}]" + (
                "" if at_paper else f" (profile `{self.profile}`, below the paper's budget)"
            )
        else:
            verdict, why = INCONCLUSIVE, f"the gain's interval overlaps [{low}, {high}] without lying within it"
        return Row(
            c,
            verdict,
            why,
            ours=ours,
            value=diff.diff,
            lo=diff.lo,
            hi=diff.hi,
            test=diff.test,
            seeds=len(ra),
            budget=f"{d['protocol']}; " + self._budget(ra),
            compared=[("with − without", diff.diff, diff.lo, diff.hi)],
            p=p,
            provenance=self._sides([(d["with"], ra), (d["without"], rb)]),
            runs=ra + rb,
            planned_seeds=_plan(diff, low if abs(diff.diff - low) < abs(diff.diff - high) else high),
        )

    def _best_of(self, c: Claim) -> Row:
        d = c.decided_by
        res = self._ablation(d["grid"])
        if not res:
            return Row(
                c,
                UNTESTABLE,
                f"the ablation was not run: `{self.rerun_grid.format(grid=d['grid'])}`",
                found=False,
            )
        metric, sign = d["metric"], 1 if d["mode"] == "max" else -1
        # the two points to test are chosen on validation (the grid's monitored metric and its mode), never on test
        monitor = res.get("monitor")
        val = f"val_{monitor}" if monitor else ""
        vsign = 1 if res.get("mode", "max") == "max" else -1
        scored = {}
        for p in res.get("points") or []:
            runs, _ = self._point_runs(d["grid"], res, p.get("label"))
            if runs and self._mean(runs, metric) is not None and val and self._mean(runs, val) is not None:
                scored[p["label"]] = runs
        claimed = [k for k in scored if k in d["best"]]
        others = [k for k in scored if k not in d["best"]]
        if not claimed or not others:
            return Row(
                c,
                UNTESTABLE,
                f"grid `{d['grid']}` lacks finished points with a validation score on both sides of the claim",
            )
        best_claimed = max(claimed, key=lambda k: vsign * self._mean(scored[k], val))
        best_other = max(others, key=lambda k: vsign * self._mean(scored[k], val))
        ra, rb, why = self._grid_pair(d["grid"], best_claimed, best_other)
        diff, why = self._difference(ra, rb, metric) if ra else (None, why)
        if diff is None:
            return Row(
                c,
                UNTESTABLE,
                f"recorded {best_claimed} {fmt(self._mean(scored[best_claimed], metric))} vs "
                f"{best_other} {fmt(self._mean(scored[best_other], metric))}, but no test: {why}",
            )
        lo, hi = sorted((sign * diff.lo, sign * diff.hi))
        chosen = (
            f" (each side's best point chosen on validation {val}: "
            f"{best_claimed} {fmt(self._mean(scored[best_claimed], val))}, "
            f"{best_other} {fmt(self._mean(scored[best_other], val))})"
        )
        if lo > 0:
            verdict = SUPPORTED
            why = f"{best_claimed} is significantly better than the best other point, {best_other}{chosen}"
        elif hi < 0:
            verdict = self._excluded(self.profile == c.paper_profile)
            why = f"{best_other}, the best other point, is significantly better than {best_claimed}{chosen}"
        else:
            verdict, why = (
                INCONCLUSIVE,
                f"{best_claimed} and {best_other} (the best point outside the claim) do not differ "
                f"significantly{chosen}",
            )
        return Row(
            c,
            verdict,
            why,
            ours=f"{best_claimed} vs {best_other}: Δ {fmt(sign * diff.diff)} [{fmt(lo)}, {fmt(hi)}]",
            value=sign * diff.diff,
            lo=lo,
            hi=hi,
            test=diff.test,
            seeds=len(ra),
            budget=f"{len(scored)} points, each " + self._budget(ra),
            compared=[(f"{best_claimed} − {best_other}", sign * diff.diff, lo, hi)],
            p=diff.p_against(0.0),
            provenance=self._sides([(best_claimed, ra), (best_other, rb)]),
            runs=ra + rb,
            planned_seeds=_plan(diff, 0.0),
        )

    def _figure(self, c: Claim) -> Row:
        d = c.decided_by
        found = sorted(self.reports.glob(d["glob"]))
        if not found:
            return Row(
                c, UNTESTABLE, f"no figure matches reports/{d['glob']}: {self._rerun('sample', d['task'])}", found=False
            )
        return Row(
            c,
            SHOWN,
            "a judgement by eye: the grid is shown below the ledger",
            figures=[p.relative_to(self.root).as_posix() for p in found],
            stale=self._stale_of(stage_of("sample", d["task"])),
        )

    def _untestable(self, c: Claim) -> Row:
        d = c.decided_by
        return Row(c, UNTESTABLE, f"{d['reason']}; would take: {d['command']}")


RANKING_SEEDS = 5  # a model compared with several others on one task: at least this many seeds
MIN_SEEDS = 3
SEED_CAP = 20


def _plan(diff: stats.Difference, boundary: float) -> int | None:
    """Seeds for 80% power to tell the difference from ``boundary`` at the seed-to-seed spread of the matched
    per-seed differences (``stats.seeds_for_power``, capped at 20); None without per-seed differences (one seed, a
    bootstrap, a count)."""
    if diff.sample is None:
        return None
    shifted = [x - boundary for x in diff.sample]
    if len(shifted) < 2 or len(set(shifted)) == 1:
        return None  # no spread to plan with
    n = stats.seeds_for_power(shifted, cap=SEED_CAP)
    return max(MIN_SEEDS, n) if n is not None else SEED_CAP + 1  # SEED_CAP + 1: beyond any budget here


def plan_seeds(rows: list[Row]) -> list[Row]:
    """Each comparison's seed count from power (``_plan``), raised to ``RANKING_SEEDS`` where one model is compared
    with several others on a task (a ranking); a row with fewer seeds than its plan says so. Changed in place."""
    pairs: dict[tuple, int] = {}
    for r in rows:
        d = r.claim.decided_by
        if d.get("kind") == "pairwise" and not d.get("grid"):
            key = (d["task"], tuple(models_of(d["a"])))
            pairs[key] = pairs.get(key, 0) + 1
    for r in rows:
        d = r.claim.decided_by
        ranking = d.get("kind") == "pairwise" and pairs.get((d.get("task"), tuple(models_of(d.get("a", [])))), 0) > 1
        if r.seeds and r.verdict not in (UNTESTABLE, SHOWN) and (r.planned_seeds or ranking):
            r.planned_seeds = max(r.planned_seeds or 0, RANKING_SEEDS if ranking else 0) or None
    return rows


def _undecided(row: Row, why: str, *, found: bool) -> Row:
    """``row`` without a verdict, saying why; a found row keeps its numbers and runs (shown, not used to decide)."""
    keep = dict(ours=row.ours, seeds=row.seeds, runs=row.runs) if found else {}
    return Row(
        row.claim,
        UNTESTABLE,
        why,
        profile=row.profile,
        budget=row.budget,
        provenance=row.provenance,
        found=found,
        **keep,
    )


def deciding_read(log: list[dict], r: RunResult) -> tuple[int, int | None, dict | None]:
    """For one run's numbers: how many times its test split was read (reproductions not counted), and which read made
    them (its number and its line: the read at the run's evaluation commit with its result), or None, None."""
    lines = [line for line in reads_for(log, task=r.task, model=r.model) if line.get("seed") == r.seed]
    want, commit = headline(read_result(r.test)), (r.provenance.commit or "")[:7]
    number, found, line_found = 0, None, None
    for line in lines:
        number += line.get("kind") != "reproduction"
        got = headline(line.get("result"))
        same = isinstance(got, (int, float)) and want is not None and abs(got - want) <= 1e-9
        if str(line.get("commit") or "")[:7] == commit and same:
            found, line_found = max(number, 1), line
    return number, found, line_found


PINNED = "pinned"
NOT_LEARNED = "did not learn at this budget"


def run_tuning(r: RunResult) -> str:
    """How the run's settings were chosen, as its training recorded it (swarmlab/drive/tuning.py); a run trained
    before runs recorded it had its settings written in params.yaml: pinned."""
    return str(r.train.get("tuning") or PINNED)


def is_swept(tuning: str) -> bool:
    """Whether a run's recorded tuning (``run_tuning``) names a sweep (swarmlab/drive/tuning.py's ``describe``)."""
    return tuning.startswith("sweep")


def annotate_tuning(rows: list[Row]) -> list[Row]:
    """Each row's ``tuning``: per side, how its settings were chosen; a comparison of a swept side with a pinned one
    is flagged. A row one of whose sides did not learn in its sweep (every trial at chance) is not decided: it says
    so, and keeps its numbers. Runs before the FDR control, so that such a row is outside the tested family."""
    out = []
    for row in rows:
        sides: dict[str, set[str]] = {}
        for r in row.runs:
            sides.setdefault(r.model, set()).add(run_tuning(r))
        if not sides:
            out.append(row)
            continue
        parts = [f"{model}: {' / '.join(sorted(ways))}" for model, ways in sides.items()]
        swept = {model for model, ways in sides.items() if any(is_swept(w) for w in ways)}
        flag = "**tuned against untuned**: " if swept and len(swept) < len(sides) else ""
        row.tuning = flag + "; ".join(parts)
        stuck = sorted(model for model, ways in sides.items() if any(NOT_LEARNED in w for w in ways))
        if stuck and row.verdict not in (UNTESTABLE, SHOWN):
            kept = row.tuning
            row = _undecided(row, f"not decided: {', '.join(stuck)} {NOT_LEARNED} (its sweep)", found=True)
            row.tuning = kept
        out.append(row)
    return out


def set_aside_exploratory(rows: list[Row], log: list[dict]) -> list[Row]:
    """A row whose numbers come from an exploratory read (one made inside ``dvc exp run`` under settings that changed
    after an earlier read; ``testsplit.check_reads``) is not decided: it keeps its numbers and says which experiment
    made them. Runs before the FDR control, so that such a row is outside the tested family."""
    out = []
    for row in rows:
        names = sorted(
            {
                line["experiment"]
                for r in row.runs
                for line in [deciding_read(log, r)[2]]
                if line is not None and line.get("experiment")
            }
        )
        if names and row.verdict not in (UNTESTABLE, SHOWN):
            why = (
                f"not decided: its numbers come from an exploratory read of the test split (dvc experiment "
                f"{', '.join(names)}: settings changed after an earlier read); rerun it outside an experiment "
                f"with --retest, counted, or under a protocol"
            )
            row = _undecided(row, why, found=True)
        out.append(row)
    return out


def annotate_reads(rows: list[Row], log: list[dict]) -> list[Row]:
    """Each row's test reads, from the repository's log (``testsplit.load_log``): per side, how many times the test
    split of each (task, model, seed) was read (reproductions of a read under the same settings not counted), and which
    of those reads made the row's numbers (the read at the run's evaluation commit with its result); and where the
    deciding reads' settings were read again (``reproductions.others``: a rerun at other code or on another machine),
    how far those results are from the deciding ones. ``log``: relabelled (``reproductions.relabel``). Changed in
    place."""
    for row in rows:
        sides: dict[str, list[RunResult]] = {}
        for r in row.runs:
            sides.setdefault(r.model, []).append(r)
        parts = []
        for model, runs in sides.items():
            counts, deciding, diffs, again = [], [], [], 0
            for r in runs:
                number, found, line = deciding_read(log, r)
                counts.append(number)
                deciding.append(found)
                if line is not None:
                    moved = reproductions.differences(line, reproductions.others(log, line))
                    diffs += moved
                    again += bool(moved)
            n = max(counts)
            text = f"{model}: {n} read{'s' if n != 1 else ''} of the test split per seed"
            if None in deciding:
                text += ", the deciding read not in the log"
            elif n > 1:
                lo, hi = min(deciding), max(deciding)
                text += f", decided by read {lo}" + (f"–{hi}" if hi != lo else "")
            if diffs:
                text += "; " + reproductions.spread_text(diffs, again, len(runs))
            parts.append(text)
        row.reads = "; ".join(parts)
    return rows


def _within(diff: stats.Difference, low: float, high: float, outside: bool) -> float | None:
    """The p of a claim that the difference lies within [low, high]: outside it, the p against the bound it is beyond
    (the nearer one); otherwise the larger of the two bounds' p (both must be excluded to call it within)."""
    p_low, p_high = diff.p_against(low), diff.p_against(high)
    if p_low is None or p_high is None:
        return None
    if outside:
        return p_low if diff.diff < low else p_high
    return max(p_low, p_high)


def apply_fdr(rows: list[Row], alpha: float = ALPHA) -> list[Row]:
    """Benjamini–Hochberg across the rows decided by a test with a p-value (``stats.fdr``): each gets its q, and a
    call (supported, contradicted, not supported at this budget) whose q is not below ``alpha`` becomes inconclusive,
    saying what p alone would have called. Rows that rest on the very same test (two quotes of one comparison) count
    once. Rows without a p (counts, single measurements, untestable, figures) are outside the family. Returns the
    rows (changed in place)."""
    family = [r for r in rows if r.p is not None and r.verdict not in (UNTESTABLE, SHOWN)]
    tests = list(dict.fromkeys(_test_key(r) for r in family))
    q_of = dict(zip(tests, stats.fdr([p for (_, _, p) in tests])))
    for r in family:
        r.q = q = q_of[_test_key(r)]
        r.family = len(tests)
        if r.verdict in CALLS and q >= alpha:
            r.before_fdr, r.verdict = r.verdict, INCONCLUSIVE
            r.why = (
                f"p = {r.p:.3g} alone would call it {r.before_fdr}, but q = {q:.3g} ≥ {alpha} after "
                f"Benjamini–Hochberg across the {len(tests)} tested claims: not called · {r.why}"
            )
    return rows


def _test_key(row: Row) -> tuple:
    """What makes two rows the same test: the same recorded runs (a grid point's runs share names with the task's, so
    their entries tell them apart), by the same test, with the same p."""
    runs = sorted((r.task, r.run, json.dumps(r.test, sort_keys=True, default=str)) for r in row.runs)
    return (tuple(runs), row.test, row.p)


def _json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _md_rows(text: str):
    """(header, cells) of every data row of the Markdown pipe tables in ``text``."""
    header = None
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|"):
            header = None
            continue
        cells = [x.strip() for x in s.strip("|").split("|")]
        if header is None:
            header = cells
        elif all(set(x) <= set("-: ") for x in cells):
            continue
        else:
            yield header, cells


def decide_across(claim: Claim, ledgers: list[Ledger]) -> Row:
    """The claim decided by the first ledger (in order of preference: the larger budget first) that has its runs;
    when none has, the last ledger's row, naming what each would need. Every other ledger is decided too: a result
    it refused, or a verdict that differs from the chosen one, goes into the row's ``other`` (the other budget's
    evidence is shown, never silently dropped)."""
    rows = [(ledger, ledger.decide(claim)) for ledger in ledgers]
    chosen = next(((ledger, row) for ledger, row in rows if row.found), None)
    if chosen is None:
        row = rows[-1][1]
        if len(rows) > 1:
            row.why += " · " + "; ".join(f"{ledger.source}: {r.why}" for ledger, r in rows[:-1])
        return row
    ledger, row = chosen
    row.source = ledger.source
    notes = []
    for other, r in rows:
        if r is row:
            continue
        where = other.source or f"reports/ (profile `{other.profile}`)"
        if r.why.startswith("refused:"):
            notes.append(f"{where}: {r.why}")
        elif r.found and r.verdict != row.verdict and r.verdict not in (UNTESTABLE, SHOWN):
            p = f", p = {r.p:.3g}" if r.p is not None else ""
            notes.append(f"{where} ({r.budget or 'its own budget'}): {r.ours} → {r.verdict}{p}")
    row.other = " · ".join(notes)
    return row
