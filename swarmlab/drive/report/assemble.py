"""The report as one document: what it reads (every task key it can find, the papers' rows, the ledgers, dvc.lock's
staleness), the state its sections share (what is missing, the disagreements, the figures drawn), and the order in
which the sections are computed and laid out. Writing it out is ``write``. The sections are functions of the
``Report`` in their own modules: ``papers`` (our numbers beside the papers', the disagreements, the papers' MLflow
runs), ``memory``, ``tables`` (status, cross-family, runtime, data, reproduce), ``figures``, ``ablations``, ``side``;
the claims ledger that opens the report is ``render``.

``swarmlab.drive.report`` imports no pipeline, task or model code: what the report asks of them (a task's monitored metric,
a model's effective config, a profile's training settings, an ablation grid's points, the models of a kind) comes in
through ``CodeBase``, which the `report` stage (pipelines/report.py) fills in.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Callable

from swarmlab.document import Bullets, Document, Heading, Image, Para, to_html, to_markdown
from swarmlab.io import atomic_dir, atomic_write_text
from swarmlab.drive.report import ablations, figures, memory, papers, reruns, side, sweeps, tables
from swarmlab.drive.report.amendments import load_amendments
from swarmlab.drive.report.baselines import EXPERIMENT, load_baselines
from swarmlab.drive.report.cells import fmt, prov_text, rel
from swarmlab.drive.report.claims import load_claims
from swarmlab.drive.report.inputs import TaskData, TaskInfo, read_json
from swarmlab.drive.report.ledger import (
    Ledger,
    annotate_reads,
    annotate_tuning,
    apply_fdr,
    decide_across,
    plan_seeds,
    set_aside_exploratory,
)
from swarmlab.drive.report.mlflow_index import MlflowIndex
from swarmlab.drive.report.presentation import BENCHMARKS, PROTOCOL, TASKS
from swarmlab.drive.report.protocols import freeze
from swarmlab.drive.report.protocols import status as protocol_status
from swarmlab.drive.report.provenance import (
    CLAIMS_LOCK,
    code_changes,
    in_history,
    locked_stages,
    provenance,
    stale_stages,
)
from swarmlab.drive.report.render import ledger_blocks, stale_blocks
from swarmlab.drive.report.results import read_task
from swarmlab.drive.report.reproductions import relabel
from swarmlab.drive.report.testsplit import load_log

FIGURES = "report/figures"  # relative to reports/


@dataclasses.dataclass(frozen=True)
class CodeBase:
    """What the report asks of the code outside ``swarmlab``; each call may raise, and the report then says so."""

    task_info: TaskInfo  # registered task -> (monitored metric, mode, model kind)
    model_config: Callable[[dict, str, str], dict]  # (params, task, model) -> the model's effective config, as a dict
    models_of_kind: Callable[[str], list[str]]  # model kind -> the registered models of that kind
    train_settings: Callable[[dict, str], dict]  # (params, task) -> the profile's training settings of the task
    grid_points: Callable[[dict, str], list[dict]]  # (params, grid) -> the ablation grid's points (each has "label")


class Report:
    """Everything the sections read (params, tasks, results, baselines, ledgers, staleness, MLflow) and what they
    add to (missing inputs, disagreements, figures, `dvc plots` data); ``build()`` lays the document out."""

    def __init__(
        self,
        params: dict,
        *,
        code: CodeBase,
        reports: Path,
        outputs: Path,
        mlflow: MlflowIndex,
        baselines_file: Path,
    ):
        self.params, self.reports, self.outputs, self.code = params, Path(reports), Path(outputs), code
        self.ml = mlflow
        self.sources, self.baselines = load_baselines(baselines_file)
        self.doc = Document("swarmlab report: our runs beside the papers'")
        self.missing: list[str] = []  # inputs missing outside a task (benchmarks, ablations, MLflow)
        self.missing_by_task: dict[str, list[str]] = {}
        self.figures: dict[str, bytes] = {}  # name -> PNG bytes, written to reports/report/figures/
        self.figure_dir: Path | None = None
        self.plot_files: dict[str, str] = {}  # reports/report/plots/... -> CSV text
        self.disagreements: list[list[str]] = []
        self.uncalled: list[str] = []  # matched numbers without an interval
        self._configs: dict[tuple, dict | None] = {}
        self.paper_runs = self._paper_runs()
        keys = (
            set(params.get("tasks") or {})
            | set(TASKS)
            | {b["task"] for b in self.baselines if b["task"] not in BENCHMARKS}
        )
        for stage in ("train", "evaluate", "sweep", "data", "sample", "frontier"):
            keys |= {
                p.name
                for p in (self.reports / stage).glob("*")
                if p.is_dir() and p.name not in ("history", "plots") and not p.name.startswith(".")
            }
        order = list(TASKS)
        self.keys = sorted(keys, key=lambda k: (order.index(k) if k in order else len(order), k))
        self.tasks = {k: TaskData(k, params, self.reports, self.outputs, code.task_info) for k in self.keys}
        seed = self.default_seed = int(params.get("seed", 0))  # the seed of a metrics entry that names none
        self.results = {}  # task -> metrics key -> swarmlab.drive.report.results.RunResult
        for k in self.keys:
            runs = read_task(self.reports, k, seed)
            self.results[k] = {**{r.model: r for r in runs if r.seed == seed}, **{r.run: r for r in runs}}
        root = self.reports.parent  # the work folder whose dvc.lock wrote these reports
        # the report stage does not judge itself: its lock entry is the one this run replaces
        self.stale = stale_stages(root, writing=("report",)) if (root / "dvc.lock").is_file() else {}
        self.claims = load_claims()
        known = in_history(root)  # a result from a commit outside the history is refused (None: not a git work tree)
        self.ledgers = [
            Ledger(self.reports, profile=str(params.get("profile")), default_seed=seed, stale=self.stale, known=known)
        ]
        if (self.reports / "claims").is_dir():  # the claims profile's pieces (claims/dvc.yaml): the larger budget first
            locked = locked_stages(root, CLAIMS_LOCK)
            pieces = (locked, stale_stages(root, lock_file=CLAIMS_LOCK)) if locked is not None else None
            self.ledgers.insert(
                0,
                Ledger(
                    self.reports / "claims",
                    profile="claims",
                    default_seed=seed,
                    source="reports/claims (claims/dvc.yaml)",
                    root=self.reports,
                    rerun=reruns.CLAIMS_TASK,
                    rerun_grid=reruns.CLAIMS_GRID,
                    params_prefix="profiles.claims.",
                    known=known,
                    code_changes=code_changes(root),
                    pieces=pieces,
                    piece_changes=code_changes(root, CLAIMS_LOCK),
                ),
            )

    # ---------------------------------------------------------------------------------------- helpers
    def _paper_runs(self) -> dict:
        return {
            r.data.tags.get("baseline_key"): r
            for r in self.ml.runs(EXPERIMENT)
            if r.data.tags.get("source") == "paper" and r.info.lifecycle_stage == "active"
        }

    def run_of(self, t: TaskData, model: str):
        # the work folder's run.json, else the id the committed training summary recorded (a checkout without the
        # work folder: the runs were made in another clone)
        run_id = t.run_files.get(model, {}).get("run_id") or t.train.get(model, {}).get("mlflow_run_id")
        run = self.ml.get(run_id) if run_id else None
        if run is None and not run_id:  # records from before run ids were kept: the newest run of the key
            name = (
                model if re.search(r"-seed\d+$", model) else f"{model}-seed{self.params.get('seed', 0)}"
            )  # runs, or old keys
            run, _ = self.ml.latest(t.key, name)
        return run, run_id

    def provenance(self, t: TaskData, model: str) -> str:
        """Run link, commit (one reader: ``swarmlab.drive.report.provenance``), the command, and a stale mark."""
        run, run_id = self.run_of(t, model)
        link = self.ml.cite(run, run_id)
        stage = "evaluate" if model in t.evaluate else "train"
        prov = provenance(
            t.evaluate.get(model)
            or t.train.get(model)
            or ({"git_commit": run.data.tags.get("git_commit")} if run is not None else None)
        )
        stale = self.stale.get(f"{stage}@{t.key}")
        mark = f" · **stale** (rerun {', '.join(stale.rerun)})" if stale else ""
        return f"{link} · {prov_text(prov)} · `dvc repro {stage}@{t.key}`{mark}"

    def figure(self, name: str, draw) -> Image | None:
        """Draw a figure into reports/report/figures/<name>.png (through ``draw(path)``); None if it fails."""
        path = self.figure_dir / f"{name}.png"
        try:
            draw(path)
        except Exception as exc:  # a figure must never take the report down
            self.missing.append(f"figure `{name}` could not be drawn: {type(exc).__name__}: {exc}")
            return None
        data = path.read_bytes()
        self.figures[name] = data
        return Image(data, f"{FIGURES}/{name}.png", "")

    def embed(self, path: Path, caption: str) -> Image:
        return Image(Path(path).read_bytes(), rel(path, self.reports), caption)

    def paper_cell(self, entry: dict, metric: str) -> str:
        m = entry["metrics"]
        if metric not in m:
            return ""
        std = m.get(f"{metric}_std")
        return fmt(m[metric], metric) + (f" ± {fmt(std, metric)}" if std is not None else "")

    def paper_link(self, entry: dict) -> str:
        run = self.paper_runs.get(entry["key"])
        src = f"{entry['source']} {entry['where']}"
        return f"{src} · {self.ml.link(run)}" if run is not None else f"{src} · `{entry['key']}`"

    def config_of(self, task: str, model: str) -> dict | None:
        """The effective config of ``model`` on ``task`` (registered defaults + the params' overrides); None when the
        model cannot be built here."""
        key = (task, model)
        if key not in self._configs:
            try:
                self._configs[key] = self.code.model_config(self.params, task, model)
            except Exception:  # an unregistered model or a refused config: no match can be claimed
                self._configs[key] = None
        return self._configs[key]

    def result_of(self, task: str, key: str):
        return self.results.get(task, {}).get(key)

    # --------------------------------------------------------------------------------------- sections
    def build(self) -> Document:
        """Compute every section (in the order their side effects need), then lay them out."""
        status = tables.status_section(self)
        beside_papers = papers.papers_section(self)  # fills self.disagreements ...
        memory_scaling = memory.memory_section(self)  # ... and so does this one
        sections = [
            beside_papers,
            papers.disagreement_section(self),
            tables.cross_family_section(self),
            figures.figures_section(self),
            memory_scaling,
            tables.runtime_section(self),
            ablations.ablation_section(self),
            sweeps.sweep_section(self),
            side.side_section(self),
            tables.data_section(self),
            papers.baselines_section(self),
            tables.reproduce_section(self),
        ]
        d = self.doc
        d.add(
            Para(
                f"Generated by `python -m pipelines.report` (DVC stage `report`, profile `{self.params.get('profile')}`) "
                "from the files under `reports/` and the MLflow store; rerun it after any run. "
                + (
                    "Every number of ours names the MLflow run that produced it, the git commit and the command. "
                    if self.ml.ok
                    else "Every number of ours names the git commit and the command that made it; the MLflow "
                    "runs' ids and links come from the store the runs wrote (`mlruns.db`, not committed), which "
                    "this report did not read (Status, below). "
                )
                + "Paper numbers come from "
                "`pipelines/paper_baselines.yaml` (each quoted from its paper; logged to MLflow by "
                "`python -m pipelines.paper_baselines`)."
            )
        )
        log = relabel(load_log())  # every test read (reports/test_reads.jsonl), kinds by the report's rule
        decided = annotate_tuning(set_aside_exploratory([decide_across(c, self.ledgers) for c in self.claims], log))
        rows = annotate_reads(plan_seeds(apply_fdr(decided)), log)
        amendments = load_amendments(claim_ids={c.id for c in self.claims})
        # each claim's protocol is frozen the first time a read decides it; a later change needs an amendment
        frozen = freeze(
            self.reports, [(r.claim, [r_.provenance.commit for r_ in r.runs if r_.provenance.commit]) for r in rows]
        )
        for r in rows:
            r.protocol, r.unamended = protocol_status(r.claim, frozen, amendments)
        # the verdicts before the claims had protocols (issue 35), kept to show what moved
        before = read_json(self.reports / "claims" / "verdicts_before_protocol.json") or {}
        d.add(*ledger_blocks(rows, self.reports, self.figure, self.embed, amendments, log, before))
        d.add(*stale_blocks(self.stale))
        d.add(*status)
        d.add(
            Heading(3, "What is missing"),
            Bullets(
                [f"`{k}`: " + "; ".join(v) for k, v in self.missing_by_task.items()] + self.missing
                or ["nothing: every input the report knows of is present."]
            ),
        )
        d.add(
            Heading(2, "Protocol differences"),
            Para("How every comparison below differs from the papers' by construction:"),
            Bullets(PROTOCOL),
        )
        for blocks in sections:
            d.add(*blocks)
        return d


def write(report: Report, reports: Path) -> None:
    """Build ``report`` and write REPORT.md, report.html and reports/report/ (figures, and the `dvc plots` data)."""
    reports = Path(reports)
    with atomic_dir(reports / "report") as tmp:
        report.figure_dir = tmp / "figures"
        report.figure_dir.mkdir(parents=True)
        doc = report.build()
        for name, text in sorted(report.plot_files.items()):
            path = tmp / Path(name).relative_to("report")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    atomic_write_text(reports / "REPORT.md", to_markdown(doc))
    atomic_write_text(reports / "report.html", to_html(doc))
