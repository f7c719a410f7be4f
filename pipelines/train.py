"""Stage `train`: every model in ``train.models`` on the tokenized task data, selected on validation.

Per model: ``outputs/train/<model>/`` (last.pt, best.pt, history.csv, run.json), an MLflow run
``<model>-seed<k>`` in the task's experiment, ``reports/train/history/<model>.csv`` (DVC plot) and
``reports/train/metrics.json`` (DVC metrics). The test split is not touched here.

    python -m pipelines.train [--profile P] [--models a,b] [--resume] [--no-tracking]
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import yaml

from pipelines.common.cli import params_from, stage_parser
from pipelines.common.engine import TrainConfig, fit
from pipelines.common.errors import SwarmlabError, atomic_write_text, cli
from pipelines.common.paths import DATA_DIR, OUTPUTS_DIR, REPORTS_DIR, git_commit
from pipelines.common.seeds import set_seeds
from pipelines.common.tracking import make_tracker

TOKENIZED_DIR = DATA_DIR / "tokenized"
TRAIN_DIR = OUTPUTS_DIR / "train"
REPORT_DIR = REPORTS_DIR / "train"
ENGINE_KEYS = set(TrainConfig.__dataclass_fields__) - {"seed", "eval_batch_size"}


def train_config(params: dict) -> TrainConfig:
    cfg = params["train"]
    try:
        return TrainConfig(seed=params["seed"], eval_batch_size=params["evaluate"]["batch_size"],
                           **{k: cfg[k] for k in ENGINE_KEYS})
    except ValueError as exc:  # values of the right type that the engine refuses (batch_size 0, amp "half")
        raise SwarmlabError(f"{exc} (train)") from None


def build_model(name: str, task, meta: dict, overrides: dict):
    """``models.create_model`` with the data's vocabulary and the task's classes; config errors become one line."""
    import models

    kwargs = {"vocab_size": meta["vocab_size"], "num_classes": task.num_classes, **overrides}
    try:
        return models.create_model(name, **kwargs)
    except KeyError as exc:
        raise SwarmlabError(f"{exc.args[0]} (train.models)") from None
    except (TypeError, ValueError) as exc:
        raise SwarmlabError(f"model {name!r}: {exc} (train.model_overrides)") from None


def run_name(model_name: str, seed: int) -> str:
    return f"{model_name}-seed{seed}"


def train_one(name: str, params: dict, *, data_dir: Path = TOKENIZED_DIR, out_root: Path = TRAIN_DIR,
              report_dir: Path = REPORT_DIR, resume: bool = False, tracking: bool = True) -> dict:
    from tasks import get_task

    task = get_task(params["task"])
    meta_path = data_dir / "meta.json"
    if not meta_path.is_file():
        raise SwarmlabError(f"{meta_path} is missing: run the tokenize stage first (dvc repro tokenize)")
    meta = json.loads(meta_path.read_text())
    set_seeds(params["seed"])  # initial weights follow `seed`, whatever ran before in this process
    model = build_model(name, task, meta, params["train"]["model_overrides"])
    seq_len = model.cfg.seq_len
    train_ds = task.load_split(data_dir, "train", seq_len)
    val_ds = task.load_split(data_dir, "val", seq_len)
    cfg = train_config(params)
    out_dir = out_root / name
    if out_dir.exists() and not resume:
        shutil.rmtree(out_dir)  # a fresh run starts clean; --resume continues from last.pt
    out_dir.mkdir(parents=True, exist_ok=True)

    run_file = out_dir / "run.json"
    previous = json.loads(run_file.read_text()) if resume and run_file.is_file() else {}
    tracker = make_tracker(tracking, task.name, run_name(name, params["seed"]), run_id=previous.get("run_id"),
                           tags={"profile": params["profile"], "git_commit": git_commit(), "model": name, "stage": "train"})
    run_file.write_text(json.dumps({"run_id": tracker.run_id, "model": name, "seed": params["seed"]}) + "\n")
    if not previous:
        tracker.log_params({"model": {"name": name, **asdict(model.cfg)}, "profile": params["profile"],
                            "augment": params.get("augment", {}),
                            "data": {"seq_len": meta["seq_len"], "train_rows": len(train_ds), "val_rows": len(val_ds)}})
    print(f"train {name}: {model.get_num_params():,} parameters, {len(train_ds)} train / {len(val_ds)} val "
          f"reviews at seq_len {seq_len}, profile {params['profile']}", flush=True)
    try:
        result = fit(model, task, train_ds, val_ds, cfg, out_dir, resume=resume, tracker=tracker, desc=f"[{name}] ")
    except BaseException:
        tracker.finish("FAILED")
        raise

    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "history").mkdir(exist_ok=True)
    shutil.copy(out_dir / "history.csv", report_dir / "history" / f"{name}.csv")
    summary = {
        "best_epoch": result.best_epoch,
        "epochs": len(result.history),
        "stopped": result.stopped,
        "num_params": result.num_params,
        "train_time_s": round(result.train_time_s, 1),
        "train_samples_per_s": round(sum(r["train_samples_per_s"] for r in result.history) / len(result.history), 1),
        "bf16_autocast": result.extra["bf16_autocast"],
        **{f"val_{k}": v for k, v in result.best_val.items()},
    }
    if tracking:
        from pipelines.common.plots import training_curve

        with tempfile.TemporaryDirectory() as tmp:
            curve = training_curve(result.history, Path(tmp) / "training_curve.png", run_name(name, params["seed"]), task.monitor)
            shutil.copy(curve, out_dir / "training_curve.png")
            resolved = Path(tmp) / "params_resolved.yaml"
            resolved.write_text(yaml.safe_dump(params, sort_keys=False))
            tracker.log_artifact(curve)
            tracker.log_artifact(resolved)
        tracker.log_artifact(out_dir / "best.pt", "checkpoint")
        tracker.log_artifact(out_dir / "history.csv")
        tracker.log_metrics({"best_epoch": result.best_epoch, **{f"best_val_{k}": v for k, v in result.best_val.items()}})
    tracker.finish()
    return summary


def train(params: dict, models: list[str] | None = None, **kwargs) -> dict:
    names = models or params["train"]["models"]
    if not names:
        raise SwarmlabError("train.models is empty: list at least one registered model")
    train_config(params)  # refuse bad engine settings before any data is read or any model trained
    report_dir = kwargs.get("report_dir", REPORT_DIR)
    metrics_path = report_dir / "metrics.json"
    summaries = json.loads(metrics_path.read_text()) if models and metrics_path.is_file() else {}
    for name in names:
        summaries[name] = train_one(name, params, **kwargs)
        atomic_write_text(metrics_path, json.dumps(summaries, indent=2) + "\n")
    return summaries


@cli
def main(argv=None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated subset of registered models (default: train.models)")
    parser.add_argument("--resume", action="store_true", help="continue each model from outputs/train/<model>/last.pt")
    parser.add_argument("--no-tracking", action="store_true", help="do not log to MLflow (torch + pyarrow only)")
    args = parser.parse_args(argv)
    params = params_from(args)
    models = args.models.split(",") if args.models else None
    train(params, models, resume=args.resume, tracking=not args.no_tracking)


if __name__ == "__main__":
    main()
