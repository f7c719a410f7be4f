#!/bin/bash
# Issue 40 item 6, a fourth call on a lent GPU machine (after reports/side/engine_gpu/run_gpu.sh's three):
#  1. engine_throughput.py eager, 300-step stretches (the earlier calls timed 60 steps, 0.2 s for a compiled row),
#     with the evaluate rows at batch 256 and 1024;
#  2. the same with fit compiled (default, reduce-overhead), the bare step compiled (reduce-overhead, the floor
#     of fit in that mode), the evaluate rows compiled (reduce-overhead), and a profile of the compiled bare step
#     (where the host time of a step goes, launches a step);
#  3. the paper profile's SwarmFormer-Small to its first evaluations, 3 epochs x seeds 0-2, eager and
#     train.compile reduce-overhead (two processes side by side: their accuracies are the question, whether the
#     compiled path trains as well; their samples/s are not clean, the benchmarks above are).
# No MLflow there (--no-tracking); no test split is read (training validates only).
# Usage: reports/side/engine_gpu/profile_seeds/run_gpu.sh OUT COMMIT
set -u -o pipefail
OUT=$1 COMMIT=$2
cd "$(dirname "$0")/../../../.."
PY=${PY:-python3}
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/engine_gpu} SWARMLAB_PROGRESS=0 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # benchmarks/ import models, tasks, swarmlab from the checkout
export SWARMLAB_GIT_COMMIT=$COMMIT   # the copy's .git (if any) need not match its tree: the metrics record this
mkdir -p "$OUT"
PARAMS=$OUT/params_paper_small.yaml
$PY - "$PARAMS" <<'PY' || exit 2
import sys, yaml
out = sys.argv[1]
p = yaml.safe_load(open("params.yaml"))
p["profile"] = "paper"
paper = p["profiles"]["paper"]
paper["tokenize"]["seq_len"] = 256
paper["tasks"]["imdb"]["models"] = ["swarmformer_small"]
paper["tasks"]["imdb"]["seeds"] = [0, 1, 2]
paper["train"]["max_epochs"] = 3
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
run timeout "${EAGER_S:-120}" $PY benchmarks/engine_throughput.py --device cuda --steps 300 --rounds 3 \
  --eval-rows 25000 --eval-batch 256,1024 > "$OUT/engine_eager.txt" 2>&1
tail -25 "$OUT/engine_eager.txt"
run timeout "${COMPILE_S:-200}" $PY benchmarks/engine_throughput.py --device cuda --steps 300 --rounds 1 \
  --compile default,reduce-overhead --bare-compile reduce-overhead --eval-rows 25000 --eval-batch 256,1024 \
  --eval-compile reduce-overhead --profile reduce-overhead > "$OUT/engine_compile.txt" 2>&1
grep -E "^\||^round|^per step|^profile" "$OUT/engine_compile.txt"
for mode in eager reduce_overhead; do
  params=$PARAMS; [ $mode = reduce_overhead ] && params=${PARAMS%.yaml}_reduce_overhead.yaml
  mkdir -p "$SWARMLAB_WORKDIR-$mode/data" && ln -sfn "$PWD/data/tokenized" "$SWARMLAB_WORKDIR-$mode/data/tokenized"
  SWARMLAB_WORKDIR=$SWARMLAB_WORKDIR-$mode run timeout "${TRAIN_S:-240}" $PY -m pipelines.train --params "$params" \
    --task imdb --models swarmformer_small --parallel 1 --no-tracking > "$OUT/train_$mode.log" 2>&1 &
done
wait
grep -h -E "eval [0-9]|error|Error" "$OUT"/train_*.log | tail -30
echo "end $(date -u +%FT%TZ)" | tee -a "$LOG"
for mode in eager reduce_overhead; do
  tar -C "$SWARMLAB_WORKDIR-$mode" --exclude=./data --exclude="*.pt" -czf "$OUT/outputs_$mode.tgz" .   # metrics, history, run.json (no checkpoints)
done
