#!/usr/bin/env bash
# Fresh machine -> the main job: set up .venv, then `dvc repro` on the default profile (params.yaml `profile:`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DVC_NO_ANALYTICS=1 PATH="$PWD/.venv/bin:$PATH"
dvc repro "$@"
dvc metrics show
