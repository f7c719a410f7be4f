#!/usr/bin/env bash
# The `cpu` profile of the image track (both datasets: data, train, evaluate, sample), outside DVC in a side
# folder, MLflow off, as run for reports/side/image_cpu/. Each stage is the same command dvc.yaml runs.
#   bash reports/side/image_cpu/run.sh            (PY = the venv's python; default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../../.."
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/image_cpu} SWARMLAB_PROGRESS=0
PY=${PY:-.venv/bin/python}
echo "start $(date -Is) load $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD)"
t0=$(date +%s)
for key in mnist fashion_mnist; do
  for stage in data train evaluate sample; do
    flags=""; if [[ $stage == train || $stage == evaluate ]]; then flags="--no-tracking"; fi
    /usr/bin/time -f "TIME $stage@$key %e s wall" nice "$PY" -m pipelines.$stage --task $key --profile cpu $flags
  done
done
echo "TOTAL $(( $(date +%s) - t0 )) s wall; end $(date -Is) load $(cut -d' ' -f1-3 /proc/loadavg)"
