#!/usr/bin/env bash
# Fresh machine -> the main job: set up .venv, then `dvc repro` on the default profile (params.yaml `profile:`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DVC_NO_ANALYTICS=1 PATH="$PWD/.venv/bin:$PATH"
dvc repro "$@"
# one screen: per task and model the headline test metric, its 95% interval, seeds, net train time
# (reports/summary.json; every number: reports/REPORT.md; `dvc metrics show reports/summary` shows the same rows)
if [ -f reports/summary.json ]; then
    python -m pipelines.summary --show
else
    echo "no reports/summary.json yet: dvc repro summary"
fi
