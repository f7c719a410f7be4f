#!/bin/bash
# Issue 40 item 6, on a lent GPU machine: the engine's throughput with each compile mode (and the evaluate stage's
# rate), then the `paper` profile for SwarmFormer-Small to its first validation evaluations. No MLflow there
# (--no-tracking); no test split is read (training validates only).
# Usage: reports/side/engine_gpu/run_gpu.sh OUT COMMIT [EPOCHS]
# The tokenized IMDB (data/tokenized, seq_len 256: the tokenize stage's output) travels with the checkout and is
# linked into the work folder /tmp/engine_gpu (SWARMLAB_WORKDIR). The run's params are params.yaml's paper profile
# with imdb's models [swarmformer_small], tokenize seq_len 256 (Small reads 256 tokens) and EPOCHS epochs
# (saved as OUT/params_paper_small.yaml); then the same with train.compile reduce-overhead (_reduce_overhead.yaml).
set -u -o pipefail
OUT=$1 COMMIT=$2 EPOCHS=${3:-3}
cd "$(dirname "$0")/../../.."
PY=${PY:-python3}
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/engine_gpu} SWARMLAB_PROGRESS=0 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # benchmarks/ import models, tasks, swarmlab from the checkout
export SWARMLAB_GIT_COMMIT=$COMMIT   # the copy's .git (if any) need not match its tree: the metrics record this
mkdir -p "$SWARMLAB_WORKDIR/data" "$OUT"
PARAMS=$OUT/params_paper_small.yaml
$PY - "$PARAMS" "$EPOCHS" <<'PY' || exit 2
import sys, yaml
out, epochs = sys.argv[1], int(sys.argv[2])
p = yaml.safe_load(open("params.yaml"))
p["profile"] = "paper"
paper = p["profiles"]["paper"]
paper["tokenize"]["seq_len"] = 256
paper["tasks"]["imdb"]["models"] = ["swarmformer_small"]
paper["train"]["max_epochs"] = epochs
yaml.safe_dump(p, open(out, "w"), sort_keys=False)
paper["train"]["compile"] = "reduce-overhead"
yaml.safe_dump(p, open(out.replace(".yaml", "_reduce_overhead.yaml"), "w"), sort_keys=False)
PY
now() { date +%s.%N; }
LOG=$OUT/commands.log
run() { local t0; t0=$(now); "$@"; local rc=$?
        awk -v a="$t0" -v b="$(now)" -v rc=$rc -v c="$*" 'BEGIN { printf "%8.1f s  rc %d  %s\n", b - a, rc, c }' | tee -a "$LOG"; }
{
  echo "start $(date -u +%FT%TZ) commit $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  $PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"
} | tee "$LOG"
ln -sfn "$PWD/data/tokenized" "$SWARMLAB_WORKDIR/data/tokenized"
run timeout 180 $PY benchmarks/engine_throughput.py --device cuda --steps 60 --rounds 3 --eval-rows 25000 \
  --eval-batch 256 2>&1 | tee "$OUT/engine_eager.txt"
run timeout 200 $PY -m pipelines.train --params "$PARAMS" --task imdb --models swarmformer_small --no-tracking 2>&1 \
  | tee "$OUT/train_paper_small.log"
run timeout "${COMPILE_S:-240}" $PY benchmarks/engine_throughput.py --device cuda --steps 60 --rounds 1 \
  --compile default,reduce-overhead 2>&1 | tee "$OUT/engine_compile.txt"
# the same training with train.compile reduce-overhead (CUDA graphs), in its own work folder
mkdir -p "$SWARMLAB_WORKDIR-ro/data" && ln -sfn "$PWD/data/tokenized" "$SWARMLAB_WORKDIR-ro/data/tokenized"
SWARMLAB_WORKDIR=$SWARMLAB_WORKDIR-ro run timeout "${TRAIN_RO_S:-200}" $PY -m pipelines.train \
  --params "${PARAMS%.yaml}_reduce_overhead.yaml" --task imdb --models swarmformer_small --no-tracking 2>&1 \
  | tee "$OUT/train_paper_small_reduce_overhead.log"
echo "end $(date -u +%FT%TZ)" | tee -a "$LOG"
tar -C "$SWARMLAB_WORKDIR" -czf "$OUT/reports.tgz" reports
[ -d "$SWARMLAB_WORKDIR-ro/reports" ] && tar -C "$SWARMLAB_WORKDIR-ro" -czf "$OUT/reports_reduce_overhead.tgz" reports
