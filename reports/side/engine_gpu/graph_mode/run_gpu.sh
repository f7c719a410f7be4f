#!/bin/bash
# train.compile graph (swarmlab/engine/graphstep.py) on a lent GPU machine: its tests (the captured step against the
# eager one, fresh dropout per replay, a recapture after the optimizer's state is reloaded, fit against compile
# default and a resumed run), fit's throughput beside reduce-overhead (engine_throughput.py), and the paper
# profile's SwarmFormer-Small in graph mode, seeds $SEEDS (default 0,1,2) x 3 epochs (validation only, no test split read).
# The machine has no pytest: its pure-Python wheels travel in gpu_wheels/ (carried) and are unpacked onto the path.
# Usage: reports/side/engine_gpu/graph_mode/run_gpu.sh OUT COMMIT
set -u -o pipefail
OUT=$1 COMMIT=$2
cd "$(dirname "$0")/../../../.."
PY=${PY:-python3}
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/graph_mode} SWARMLAB_PROGRESS=0 PYTHONUNBUFFERED=1
export SWARMLAB_GIT_COMMIT=$COMMIT
mkdir -p "$OUT" "$SWARMLAB_WORKDIR/data" /tmp/wheels
$PY -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('/tmp/wheels') for w in glob.glob('gpu_wheels/*.whl')]"
export PYTHONPATH="$PWD:/tmp/wheels${PYTHONPATH:+:$PYTHONPATH}"
PARAMS=$OUT/params_paper_small_graph.yaml
$PY - "$PARAMS" "${SEEDS:-0,1,2}" <<'PY' || exit 2
import sys, yaml
p = yaml.safe_load(open("params.yaml"))
p["profile"] = "paper"
paper = p["profiles"]["paper"]
paper["tokenize"]["seq_len"] = 256
paper["tasks"]["imdb"]["models"] = ["swarmformer_small"]
paper["tasks"]["imdb"]["seeds"] = [int(x) for x in sys.argv[2].split(",")]
paper["train"]["max_epochs"] = 3
paper["train"]["compile"] = "graph"
yaml.safe_dump(p, open(sys.argv[1], "w"), sort_keys=False)
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
run timeout "${TESTS_S:-120}" $PY -m pytest -q -p no:cacheprovider --noconftest -rs tests/swarmlab/test_graphstep.py \
  > "$OUT/pytest.txt" 2>&1
tail -15 "$OUT/pytest.txt"
run timeout "${BENCH_S:-100}" $PY benchmarks/engine_throughput.py --device cuda --steps 300 --rounds 1 \
  --compile reduce-overhead,graph > "$OUT/engine_graph_mode.txt" 2>&1
grep -E "^\||^round" "$OUT/engine_graph_mode.txt"
ln -sfn "$PWD/data/tokenized" "$SWARMLAB_WORKDIR/data/tokenized"
run timeout "${TRAIN_S:-140}" $PY -m pipelines.train --params "$PARAMS" --task imdb --models swarmformer_small \
  --parallel 1 --no-tracking > "$OUT/train_graph.log" 2>&1
grep -h -E "eval [0-9]|rror" "$OUT/train_graph.log" | tail -20
echo "end $(date -u +%FT%TZ)" | tee -a "$LOG"
tar -C "$SWARMLAB_WORKDIR" --exclude=./data --exclude="*.pt" -czf "$OUT/outputs_graph.tgz" .
