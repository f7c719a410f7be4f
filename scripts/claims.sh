#!/usr/bin/env bash
# One piece of the `claims` profile (params.yaml: each seed claim's decisive experiment at a CPU scale), run in a
# work folder of its own so that the default profile's results stay in place, and kept where the ledger reads it:
#
#   bash scripts/claims.sh task <task> [<task>...]   data, train, evaluate (and sample, for a generative task)
#   bash scripts/claims.sh grid <grid> [<grid>...]   an ablation grid (python -m pipelines.ablate --resume), after
#                                                    its task's data where that is missing
#   bash scripts/claims.sh --profile smoke task ...  the same at another profile (a quick check of the script)
#   bash scripts/claims.sh --retest task <task>...   after a setting changed (an lr the search moved): the changed
#                                                    runs train again and the test is read again, counted as a re-read
#
# Work folder: outputs/claims (SWARMLAB_WORKDIR; its data is built at the claims profile's options). Results:
# reports/claims/<stage>/<task>/ and reports/claims/ablations/<grid>/ (committed; the report's ledger reads them).
# A killed piece resumes: train continues its interrupted runs from their checkpoints and keeps its finished ones whose
# settings, code and data are unchanged (a changed run trains again); the grids pick up their unfinished points
# (--resume); a grid whose results were kept (committed) with points missing resumes from them in a fresh clone too.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
WORK="$PWD/outputs/claims"
KEEP="$PWD/reports/claims"
PROFILE=claims
RETEST=()
while [ "${1:-}" = --profile ] || [ "${1:-}" = --retest ]; do
  if [ "$1" = --retest ]; then RETEST=(--retest); shift; else PROFILE=${2:?--profile needs a name}; shift 2; fi
done
mode=${1:-}
shift || true
if [ "$mode" != task ] && [ "$mode" != grid ] || [ $# -eq 0 ]; then
  echo "error: usage: bash scripts/claims.sh [--profile P] [--retest] task <task>... | grid <grid>..." >&2
  exit 2
fi
if [ "$mode" = grid ] && [ ${#RETEST[@]} -gt 0 ]; then
  echo "error: --retest is for task pieces (train, then evaluate): a grid evaluates its own points" >&2
  exit 2
fi
export SWARMLAB_WORKDIR="$WORK"
stage() { echo "[claims] python -m pipelines.$*" >&2; python -m "pipelines.$1" "${@:2}" --profile "$PROFILE"; }
keep() {  # copy one stage's reports of the work folder into reports/claims, replacing the previous copy
  local src="$WORK/reports/$1" dst="$KEEP/$1"
  [ -e "$src" ] || return 0
  rm -rf "$dst.tmp" && mkdir -p "$(dirname "$dst")" && cp -r "$src" "$dst.tmp" && rm -rf "$dst" && mv "$dst.tmp" "$dst"
}
# Every name is checked first, so that a wrong one costs nothing (one line, exit 2); then the data each piece's task
# reads and lacks is built, in order: IMDB's first (prepare, augment, tokenize) when a task reads data/prepared or
# data/tokenized (the imdb task and its grids, LRA Text), then each task's own (Task.build_data: the long tasks, the
# set tasks...). A grid builds no data (its points reuse the work folder's), so the task it trains counts here too.
data_tasks=$(python - "$mode" "$PROFILE" "$@" <<'EOF'
import sys
from swarmlab.ablations import grid_spec
from swarmlab.errors import SwarmlabError
from swarmlab.params import load_params
from swarmlab.runs import make_task
from tasks.base import Task
mode, profile, names = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    params = load_params(profile=profile)
    keys = [grid_spec(params, n)["task"] if mode == "grid" else n for n in names]
    tasks = [make_task(params, k) for k in dict.fromkeys(keys)]
    imdb = make_task(params, "imdb")
except SwarmlabError as exc:
    sys.exit(f"error: {exc}")
reads = {str(v) for t in tasks for v in vars(t.options).values()}
build = ["imdb"] if reads & {"data/prepared", "data/tokenized"} and not imdb.data_dir.is_dir() else []
build += [t.key for t in tasks if type(t).build_data is not Task.build_data and not t.data_dir.is_dir()]
print(" ".join(dict.fromkeys(build)))
EOF
) || exit 2
mkdir -p "$WORK" "$KEEP"
for key in $data_tasks; do stage data --task "$key"; done
for name in "$@"; do
  if [ "$mode" = grid ]; then
    # a grid kept in reports/claims but not in this work folder (a fresh clone, another machine): its finished
    # points are carried over, so that --resume runs only the points still missing
    if [ ! -e "$WORK/reports/ablations/$name" ] && [ -e "$KEEP/ablations/$name/results.json" ]; then
      mkdir -p "$WORK/reports/ablations" && cp -r "$KEEP/ablations/$name" "$WORK/reports/ablations/$name"
      echo "[claims] resuming grid $name from its results in $KEEP/ablations/$name" >&2
    fi
    stage ablate --grid "$name" --resume
    keep "ablations/$name"
    continue
  fi
  stage train --task "$name"
  stage evaluate --task "$name" "${RETEST[@]}"
  if python -c "import sys; from swarmlab.params import load_params; from swarmlab.runs import make_task; \
from tasks.base import Task; sys.exit(0 if type(make_task(load_params(profile=sys.argv[2]), sys.argv[1])).sample is not Task.sample else 1)" "$name" "$PROFILE"; then
    stage sample --task "$name"
    keep "sample/$name"
  fi
  for what in data train evaluate; do keep "$what/$name"; done
done
echo "[claims] results in $KEEP" >&2
