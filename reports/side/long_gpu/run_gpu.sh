#!/bin/bash
# The long track's "With a GPU" runs (issue 13): the paper profile's models and data for one task, each model
# trained for the same net budget, then the test split once. No MLflow (not installed on the GPU machine).
# Usage: reports/side/long_gpu/run_gpu.sh TASK BUDGET_S MODELS OUT [COMMIT]
#   e.g. reports/side/long_gpu/run_gpu.sh lra_text 110 hsw,longformer,transformer $OUT 3f91d4c
# The task's data folder (data/<task>, built beforehand by `python -m pipelines.data --profile paper --task TASK`)
# travels with the checkout and is linked into the work folder /tmp/long_gpu (SWARMLAB_WORKDIR). The run's params
# are params.yaml's paper profile with the task's models and time_budget_s replaced (saved as OUT/params_TASK.yaml).
# OPTIONS_JSON='{"max_train": 64, ...}' (a dry run on a small copy) also replaces task options and builds the data
# in the work folder instead. TRAIN_JSON='{"lr": 2e-4}' replaces train settings of the task (a probe).
set -u -o pipefail
TASK=$1 BUDGET=$2 MODELS=$3 OUT=$4 COMMIT=${5:-unknown}
cd "$(dirname "$0")/../../.."
PY=${PY:-python3}
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/long_gpu} SWARMLAB_PROGRESS=0 PYTHONUNBUFFERED=1
export SWARMLAB_GIT_COMMIT=$COMMIT   # the copy's .git (if any) need not match its tree: the metrics record this
mkdir -p "$SWARMLAB_WORKDIR/data" "$OUT"
PARAMS=$OUT/params_$TASK.yaml
$PY - "$TASK" "$BUDGET" "$MODELS" "$PARAMS" "${OPTIONS_JSON:-}" "${TRAIN_JSON:-}" <<'PY' || exit 2
import json, sys, yaml
task, budget, models, out, options, train = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], *sys.argv[5:]
p = yaml.safe_load(open("params.yaml"))
p["profile"] = "paper"
section = p["profiles"]["paper"]["tasks"][task]
section["models"] = models
section["train"]["time_budget_s"] = budget
if options:
    section.setdefault("options", {}).update(json.loads(options))
if train:
    section["train"].update(json.loads(train))
yaml.safe_dump(p, open(out, "w"), sort_keys=False)
PY
now() { date +%s.%N; }
LOG=$OUT/commands_$TASK.log
run() { local t0; t0=$(now); "$@"; local rc=$?
        awk -v a="$t0" -v b="$(now)" -v rc=$rc -v c="$*" 'BEGIN { printf "%8.1f s  rc %d  %s\n", b - a, rc, c }' | tee -a "$LOG"; }
{
  echo "start $(date -u +%FT%TZ) commit $COMMIT task $TASK budget ${BUDGET}s models $MODELS"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  $PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"
} | tee "$LOG"
[ -d data/prepared ] && ln -sfn "$PWD/data/prepared" "$SWARMLAB_WORKDIR/data/prepared"
if [ -z "${OPTIONS_JSON:-}" ]; then
  ln -sfn "$PWD/data/$TASK" "$SWARMLAB_WORKDIR/data/$TASK"
else
  run $PY -m pipelines.data --params "$PARAMS" --task "$TASK" 2>&1 | tee -a "$OUT/run_$TASK.log"
fi
# SKIP_TRAIN=1: evaluate the models trained by an earlier call on the same (still warm) machine
[ -n "${SKIP_TRAIN:-}" ] && MODELS_TO_TRAIN="" || MODELS_TO_TRAIN=$MODELS
for m in ${MODELS_TO_TRAIN//,/ }; do
  run $PY -m pipelines.train --params "$PARAMS" --task "$TASK" --models "$m" --no-tracking 2>&1 | tee -a "$OUT/run_$TASK.log"
done
# SKIP_EVAL=1: validation only (a probe whose settings are chosen on validation leaves the test split alone)
[ -n "${SKIP_EVAL:-}" ] || run $PY -m pipelines.evaluate --params "$PARAMS" --task "$TASK" --no-tracking 2>&1 | tee -a "$OUT/run_$TASK.log"
echo "end $(date -u +%FT%TZ)" | tee -a "$LOG"
tar -C "$SWARMLAB_WORKDIR" -czf "$OUT/reports_$TASK.tgz" reports
