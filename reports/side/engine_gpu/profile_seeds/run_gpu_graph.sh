#!/bin/bash
# Issue 40 item 6, a fifth call on the same GPU machine, after run_gpu.sh showed fit compiled (reduce-overhead) at
# 15,936 samples/s at batch 48, its bare step at 18,456, and the bare step's host time outside the two CUDA graph
# replays (AdamW, clipping, autograd's bookkeeping) a step: the whole step captured in one CUDA graph, the model
# eager and compiled (default: inductor's kernels), beside the bare step compiled and fit compiled, 300 steps x 2.
# Usage: reports/side/engine_gpu/profile_seeds/run_gpu_graph.sh OUT
set -u -o pipefail
OUT=$1
cd "$(dirname "$0")/../../../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 SWARMLAB_PROGRESS=0
mkdir -p "$OUT"
t0=$(date +%s)
timeout "${GRAPH_S:-360}" python3 benchmarks/engine_throughput.py --device cuda --steps 300 --rounds 2 \
  --bare-compile reduce-overhead --graph-compile eager,default --compile reduce-overhead 2>&1 | tee "$OUT/engine_graph.txt"
echo "rc ${PIPESTATUS[0]}, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/engine_graph.txt"
