"""What a refactor must not change (issue 36): every registered model's seed-0 initial weights, and the smoke
profile's trained and tested metrics, written as one JSON file to compare before and after.

    python scripts/behaviour_census.py --out before.json [--tasks clustering_direct,listops]
    python scripts/behaviour_census.py --out after.json  && python scripts/behaviour_census.py --compare before.json after.json

Weights: sha256 of each model's state dict (names, shapes, bytes) right after ``torch.manual_seed(0);
create_model(name)``. Metrics: the smoke profile's data, train and evaluate stages of each task, run as the pipeline
runs them (``python -m pipelines.<stage>``, tracking off) in a temporary work folder, every metric kept except what
a clock, a machine or a commit decides (times, throughputs, latencies, memory, commits, code hashes, run ids).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASKS = "imdb,clustering_direct,clustering_mog,listops,lra_text,mnist"  # IMDB first: LRA Text reads its splits
VOLATILE = re.compile(
    r"time|_s$|per_s|latency|memory|_bytes|_mb$|_gb$|commit|code|run_id|date|host|pid|wall|started|finished|"
    r"node|threads|machine|cpu|device|resources|mlflow|path|dir$|root"
)


def weights() -> dict[str, str]:
    import torch

    import models

    out = {}
    for name in models.list_models():
        torch.manual_seed(0)
        model = models.create_model(name)
        h = hashlib.sha256()
        for key, value in model.state_dict().items():
            h.update(
                key.encode() + str(tuple(value.shape)).encode() + value.detach().cpu().contiguous().numpy().tobytes()
            )
        out[name] = h.hexdigest()
    return out


def _clean(node):
    if isinstance(node, dict):
        return {k: _clean(v) for k, v in sorted(node.items()) if not VOLATILE.search(str(k))}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def metrics(tasks: list[str]) -> dict:
    work = Path(tempfile.mkdtemp(prefix="behaviour-"))
    # the test reads go to the work folder's own log, not the repository's (reports/test_reads.jsonl)
    env = {
        **os.environ,
        "SWARMLAB_WORKDIR": str(work),
        "SWARMLAB_PROGRESS": "0",
        "SWARMLAB_TEST_READ_LOG": str(work / "test_reads.jsonl"),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    out = {}
    for task in tasks:
        for stage, extra in (("data", []), ("train", ["--no-tracking"]), ("evaluate", ["--no-tracking"])):
            cmd = [sys.executable, "-m", f"pipelines.{stage}", "--task", task, "--profile", "smoke", *extra]
            run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"{' '.join(cmd[1:])} failed:\n{run.stderr[-2000:]}")
        for stage in ("train", "evaluate"):
            path = work / "reports" / stage / task / "metrics.json"
            out[f"{stage}/{task}"] = _clean(json.loads(path.read_text()))
        print(f"{task}: done", file=sys.stderr, flush=True)
    return out


def compare(a: Path, b: Path) -> int:
    x, y = json.loads(a.read_text()), json.loads(b.read_text())
    bad = 0
    for part in ("weights", "metrics"):
        for key in sorted(set(x[part]) | set(y[part])):
            if x[part].get(key) != y[part].get(key):
                bad += 1
                print(f"differs: {part} {key}")
    n = sum(len(x[p]) for p in ("weights", "metrics"))
    print(
        f"{n - bad} of {n} identical"
        if bad
        else f"all {n} identical (weights of {len(x['weights'])} models, {len(x['metrics'])} metrics files)"
    )
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the census here")
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*map(Path, args.compare))
    if not args.out:
        parser.error("--out or --compare")
    sys.path.insert(0, str(REPO))
    census = {"weights": weights(), "metrics": metrics(args.tasks.split(","))}
    Path(args.out).write_text(json.dumps(census, indent=1, sort_keys=True) + "\n")
    print(f"{len(census['weights'])} models, {len(census['metrics'])} metrics files -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
