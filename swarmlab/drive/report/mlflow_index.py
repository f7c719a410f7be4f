"""A read-only view of the MLflow tracking store for the report: run links, the latest run of a name, the papers' runs.
Without a store (no sqlite file yet, mlflow not installed, or ``--no-mlflow``) ``ok`` is False and ``status`` says
why; the report then shows no links. A store that exists but cannot be read (a server that does not answer, a damaged
database) is one line, before anything is written: the report would otherwise replace good links with none."""

from __future__ import annotations

from pathlib import Path

from swarmlab.drive.report.cells import rel
from swarmlab.errors import SwarmlabError
from swarmlab.tracking import SQLITE, check_tracking_uri, open_client, sqlite_path

FIX = "start or fix the store, or run the report with --no-mlflow (no run links)"


class MlflowIndex:
    """Read-only view of the tracking store; ``ok`` is False (and ``status`` says why) when there is none."""

    def __init__(self, uri: str | None, ui: str, enabled: bool = True, *, root: Path | None = None):
        """``root``: the repository whose paths a sqlite store's URI is shown relative to."""
        self.uri, self.ui, self.ok, self.client, self.root = uri, ui.rstrip("/"), False, None, root
        self._runs: dict[str, list] = {}
        if not enabled:
            self.status = "not read (`--no-mlflow`)"
            return
        db = sqlite_path(uri)
        if db is not None and not db.is_file():
            self.status = (
                f"no store at `{self.show_uri()}`: run ids and links are not shown (make runs with MLflow on, "
                f"or point MLFLOW_TRACKING_URI at the store)"
            )
            return
        try:
            import mlflow  # noqa: F401 - heavy, and the report runs without it
        except ImportError:
            self.status = "not read (mlflow is not installed: `pip install -e .[stack]`)"
            return
        try:
            check_tracking_uri(uri)  # a server that never answers: seconds, not minutes of MLflow's retries
        except SwarmlabError as exc:
            raise SwarmlabError(f"{exc} (report: {FIX})") from None
        try:
            self.client = open_client(uri)
            self.experiments = {e.name: e.experiment_id for e in self.client.search_experiments()}
        except Exception as exc:  # an unreachable server, a damaged store
            raise self.unreadable(exc) from None
        self.ok = True
        self.status = f"`{self.show_uri()}`: {len(self.experiments)} experiments"

    def show_uri(self) -> str:
        path = sqlite_path(self.uri)
        if path is not None:
            return SQLITE + (rel(path, self.root) if self.root is not None else str(path))
        return self.uri or "?"

    def runs(self, experiment: str) -> list:
        if not self.ok or experiment not in self.experiments:
            return []
        if experiment not in self._runs:
            found, page = [], None
            while True:
                try:
                    batch = self.client.search_runs(
                        [self.experiments[experiment]],
                        max_results=1000,
                        page_token=page,
                        order_by=["attributes.start_time ASC", "attributes.run_id ASC"],
                    )
                except Exception as exc:  # the store went away mid-report
                    raise self.unreadable(exc) from None
                found += list(batch)
                page = batch.token
                if not page:
                    break
            self._runs[experiment] = found
        return self._runs[experiment]

    def get(self, run_id: str):
        if not self.ok or not run_id:
            return None
        from mlflow.exceptions import MlflowException  # mlflow: imported above when ok

        try:
            return self.client.get_run(run_id)
        except MlflowException as exc:
            if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                return None  # the store answered: no such run (deleted, or recorded in another store)
            raise self.unreadable(exc) from None
        except Exception as exc:  # the store went away mid-report
            raise self.unreadable(exc) from None

    def unreadable(self, exc: Exception) -> SwarmlabError:
        """One line for a store that exists but cannot be read."""
        return SwarmlabError(
            f"cannot read the tracking store {self.show_uri()} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160] if str(exc) else 'no message'}): {FIX}"
        )

    def latest(self, experiment: str, run_name: str):
        """The newest finished run of that key (``<model>-seed<k>``: the stages' ``run`` tag; older runs were named
        by it) that is not an ablation point; and how many such runs exist."""
        runs = [
            r
            for r in self.runs(experiment)
            if (r.data.tags.get("run") or r.info.run_name) == run_name
            and "ablation_grid" not in r.data.tags
            and r.info.status == "FINISHED"
        ]
        return (runs[-1] if runs else None), len(runs)

    def link(self, run) -> str:
        if run is None:
            return "no MLflow run"
        return f"[run {run.info.run_id[:8]}]({self.ui}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id})"

    def cite(self, run, run_id: str | None) -> str:
        """The run's link when this store has it; else the id its records name (a run made in another clone's store,
        or read without a store) and why there is no link; else "no MLflow run"."""
        if run is not None:
            return self.link(run)
        if not run_id:
            return "no MLflow run"
        return f"run `{run_id[:8]}` ({'not in this store' if self.ok else 'no store read here'})"
