"""Screenshots of the MLflow UI on a store, for docs/tracking.md: where a fresh browser lands, the runs table, a run's
overview, charts and system metrics, and its logged model (issue 38's "report in your note").

The store is copied first (the UI may write an experiment's tags), served by the light MLflow server on a free port
of 127.0.0.1, and photographed by headless Chromium (Debian's `chromium`, or $SWARMLAB_CHROMIUM), each page in a
fresh profile, as a first visit sees it. The run is the experiment's latest. The PNGs are written to a temporary
sibling of ``--out`` and moved in when all of them exist.

    python scripts/mlflow_screenshots.py --store mlruns.db --experiment clustering_direct [--out docs/images]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from swarmlab.errors import SwarmlabError, cli
from swarmlab.mlflow_ui import CHROMIUM_FLAGS, mlflow_server

FLAGS = [*CHROMIUM_FLAGS, "--virtual-time-budget=25000", "--window-size=1400,1000"]
TRIES = 3


@cli
def main(argv: list[str] | None = None) -> None:
    description, _, epilog = (__doc__ or "").partition("\n\n")
    parser = argparse.ArgumentParser(
        description=description, epilog=epilog.rstrip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, default=Path("mlruns.db"), help="the sqlite store (default mlruns.db)")
    parser.add_argument("--experiment", default="clustering_direct", help="the experiment to show (a task key)")
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="folder of the PNGs (docs/images)")
    args = parser.parse_args(argv)
    if not args.store.is_file():
        raise SwarmlabError(f"no MLflow store at {args.store}: run the pipeline with tracking on first")
    chromium = os.environ.get("SWARMLAB_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        raise SwarmlabError("Chromium is not installed: `apt-get install -y chromium`, or set SWARMLAB_CHROMIUM")
    from mlflow.tracking import MlflowClient  # mlflow: heavy, and only this needs it

    with tempfile.TemporaryDirectory(prefix="mlflow-shots-") as tmp:
        db = Path(tmp) / "mlruns.db"
        shutil.copy2(args.store, db)
        client = MlflowClient(f"sqlite:///{db}")
        exp = client.get_experiment_by_name(args.experiment)
        if exp is None:
            names = ", ".join(e.name for e in client.search_experiments())
            raise SwarmlabError(f"no experiment {args.experiment!r} in {args.store} (it has: {names})")
        runs = client.search_runs([exp.experiment_id], max_results=1, order_by=["attributes.start_time DESC"])
        if not runs:
            raise SwarmlabError(f"experiment {args.experiment!r} in {args.store} has no runs")
        run = f"#/experiments/{exp.experiment_id}/runs/{runs[0].info.run_id}"
        ml = "?workflowType=machine_learning"  # the UI's Model training mode (docs/tracking.md: where MLflow lands)
        pages = {
            "mlflow_fresh_browser.png": f"#/experiments/{exp.experiment_id}",
            "mlflow_runs.png": f"#/experiments/{exp.experiment_id}{ml}",
            "mlflow_run_overview.png": f"{run}{ml}",
            "mlflow_run_charts.png": f"{run}/model-metrics{ml}",
            "mlflow_system_metrics.png": f"{run}/system-metrics{ml}",
        }
        outputs = runs[0].outputs.model_outputs if runs[0].outputs else []
        if outputs:  # a training run's best checkpoint, as its MLflow model
            pages["mlflow_logged_model.png"] = f"#/experiments/{exp.experiment_id}/models/{outputs[0].model_id}{ml}"
        staged = Path(tempfile.mkdtemp(prefix=".shots-", dir=args.out.parent if args.out.parent.is_dir() else "."))
        try:
            with mlflow_server(db, Path(tmp) / "server.log") as base:
                for name, page in pages.items():
                    # charts load after the page, each by its own request, and a busy machine can leave them as spinners
                    # when the screenshot is taken: of TRIES first visits, keep the fullest picture (the largest PNG)
                    shots = []
                    for k in range(TRIES):
                        shot = staged / f"{k}-{name}"
                        profile = f"--user-data-dir={Path(tmp) / f'{k}-{name}'}"
                        cmd = [chromium, *FLAGS, profile, f"--screenshot={shot}", base + "/" + page]
                        subprocess.run(cmd, capture_output=True, timeout=180)
                        if shot.is_file() and shot.stat().st_size > 10_000:
                            shots.append(shot)
                    if not shots:
                        raise SwarmlabError(f"Chromium made no screenshot of {base}/{page}")
                    best = max(shots, key=lambda p: p.stat().st_size)
                    size = best.stat().st_size
                    best.rename(staged / name)
                    for extra in shots:
                        extra.unlink(missing_ok=True)
                    print(f"{name}: {page} ({size:,} bytes, the largest of {len(shots)})")
                args.out.mkdir(parents=True, exist_ok=True)
                for shot in staged.iterdir():
                    os.replace(shot, args.out / shot.name)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    print(f"wrote {len(pages)} screenshots of {args.experiment} (run {runs[0].info.run_name}) to {args.out}")


if __name__ == "__main__":
    main()
