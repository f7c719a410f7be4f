#!/bin/bash
# The cpu-profile set track, once: data, train + evaluate of both tasks, frontier; wall time per command.
cd /work/wt-sets2
export SWARMLAB_WORKDIR=/tmp/sets_cpu SWARMLAB_PROGRESS=0
PY=/work/main/.venv/bin/python
rm -rf /tmp/sets_cpu
T0=$(date +%s.%N)
for cmd in "pipelines.data --task clustering_direct" "pipelines.data --task clustering_mog" \
           "pipelines.train --task clustering_direct --no-tracking" "pipelines.evaluate --task clustering_direct --no-tracking" \
           "pipelines.train --task clustering_mog --no-tracking" "pipelines.evaluate --task clustering_mog --no-tracking" \
           "pipelines.frontier --task clustering_direct"; do
  t=$(date +%s.%N)
  echo "=== python -m $cmd --profile cpu  (load $(cut -d' ' -f1 /proc/loadavg))"
  $PY -m $cmd --profile cpu || { echo "FAILED: $cmd"; exit 1; }
  echo "=== wall $(echo "$(date +%s.%N) - $t" | bc) s: $cmd"
done
echo "=== TOTAL wall $(echo "$(date +%s.%N) - $T0" | bc) s (load $(cut -d' ' -f1 /proc/loadavg))"
