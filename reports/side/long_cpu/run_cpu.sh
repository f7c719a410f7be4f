#!/bin/bash
# The cpu profile of the long track, once, in a scratch workdir (no MLflow), timing every command.
# Run as: nice -n 10 reports/side/long_cpu/run_cpu.sh > $SWARMLAB_WORKDIR/run.out 2>&1 &
set -e
cd "$(git rev-parse --show-toplevel)"
export SWARMLAB_WORKDIR=${SWARMLAB_WORKDIR:-/tmp/long_cpu} OMP_NUM_THREADS=1 SWARMLAB_PROGRESS=0
PY=${PY:-python}   # the run used /work/main/.venv/bin/python
mkdir -p "$SWARMLAB_WORKDIR"
LOG=$SWARMLAB_WORKDIR/commands.log
: > $LOG
run() { /usr/bin/time -a -o $LOG -f "%e s wall  %U s user  %S s sys  %M KB peak RSS  $*" "$@"; tail -1 $LOG; }
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $LOG
run $PY -m pipelines.prepare --profile cpu
T0=$(date +%s.%N)
for task in lra_text listops; do
  run $PY -m pipelines.data --task $task --profile cpu
  run $PY -m pipelines.train --task $task --profile cpu --no-tracking
  run $PY -m pipelines.evaluate --task $task --profile cpu --no-tracking
done
printf "%8.1f s  total of the long track (data + train + evaluate, prepare excluded)\n" "$(echo "$(date +%s.%N) - $T0" | bc)" | tee -a $LOG
echo "end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $LOG
