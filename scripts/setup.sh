#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with the pinned stack.
# torch==2.13.0 resolves to the local CPU wheel through $PIP_FIND_LINKS where the machine provides one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# editable, setuptools' default mode: an import hook for the four packages alone (swarmlab, and models, tasks,
# pipelines, which the required layout puts at the top), never the repository root on sys.path, which would make
# tests, benchmarks, scripts, data... importable names in every program of this environment (README, Install)
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]' \
  2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import torch, ray, mlflow, dvc, optuna, nltk, tokenizers, _ruamel_yaml; print('stack ok: torch', torch.__version__)"
# DVC's queued and temporary experiments run in copies under .dvc/tmp/exps/: let them see paths.datasets (docs/pipeline.md)
.venv/bin/python -m swarmlab.dvc_copies || echo "warning: DVC's experiment copies will not find paths.datasets" >&2
