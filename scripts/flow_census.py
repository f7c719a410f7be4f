"""How a run's settings flow (issue 36): one train stage of one model and one seed, at the smoke profile, counted.

    python scripts/flow_census.py [--task clustering_direct] [--model set_linear_mean]

Prints, for that one run: how many calls into project functions take ``params`` (the whole params tree) and in how
many files; how many times the engine's settings are resolved (``train_config``); and how many times each model is
built (``models.create_model``). The data is built first in a temporary work folder; nothing in the repository is
touched. The counts come from ``sys.setprofile`` over the stage's own process (tracking off, one run at a time).
"""

from __future__ import annotations

import argparse
import collections
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="clustering_direct")
    parser.add_argument("--model", default="set_linear_mean")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="census-"))
    env = {**os.environ, "SWARMLAB_WORKDIR": str(work), "SWARMLAB_PROGRESS": "0"}
    subprocess.run(
        [sys.executable, "-m", "pipelines.data", "--task", args.task, "--profile", "smoke"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    os.environ.update({"SWARMLAB_WORKDIR": str(work), "SWARMLAB_PROGRESS": "0"})
    sys.path.insert(0, str(REPO))
    # the stage as its command line runs it, in this process (the smoke profile trains one seed)
    argv = ["pipelines.train", "--task", args.task, "--profile", "smoke", "--models", args.model, "--no-tracking"]
    calls: collections.Counter = collections.Counter()
    root = str(REPO)

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(root) or ".venv" in code.co_filename:
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        where = (Path(code.co_filename).relative_to(REPO).as_posix(), code.co_name)
        if "params" in names:
            calls[("params",) + where] += 1
        if code.co_name in ("train_config", "create_model"):
            calls[(code.co_name,) + where] += 1

    sys.setprofile(profile)
    try:
        sys.argv = argv + ["--parallel", "1"]
        try:
            runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
    finally:
        sys.setprofile(None)
    reads = {k: v for k, v in calls.items() if k[0] == "params"}
    files = {k[1] for k in reads}
    print(f"one run: {args.task} / {args.model}, seed 0, smoke profile")
    print(f"calls taking `params`: {sum(reads.values())} in {len(files)} files ({len(reads)} functions)")
    for (_, file, fn), n in sorted(reads.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:3d}  {file}:{fn}")
    for name in ("train_config", "create_model"):
        n = sum(v for k, v in calls.items() if k[0] == name)
        print(f"{name}: {n} call(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
