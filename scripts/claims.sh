#!/usr/bin/env bash
# Pieces of the `claims` profile (each paper claim's decisive experiment at a CPU scale), through their DVC stages
# (claims/dvc.yaml; the work is pipelines/claims.py), so that claims/dvc.lock records what made each one:
#
#   bash scripts/claims.sh task <task> [<task>...]   dvc repro claims/dvc.yaml:task@<task> (and sample@<task>, for a
#                                                    generative task)
#   bash scripts/claims.sh grid <grid> [<grid>...]   dvc repro claims/dvc.yaml:grid@<grid>
#   bash scripts/claims.sh sweep <task> [<task>...]  dvc repro claims/dvc.yaml:sweep@<task> alone (task@<task> runs it
#                                                    first: what it chooses is a dependency of the decisive runs)
#   bash scripts/claims.sh --retest task <task>...   after a setting changed: the changed runs train again and the
#                                                    test split is read again, logged as a re-read (SWARMLAB_RETEST=1)
#
# Every name is checked first (one line, exit 2, nothing run). Results: reports/claims/ (committed, with
# claims/dvc.lock). A killed piece resumes where it stopped. Without DVC: python -m pipelines.claims task <task>.
# A task piece longer than a session: `python scripts/park.py save <task>` commits its finished runs to
# claims/parked/<task> (`save <task> --evaluate` for runs too big for git: evaluated, without checkpoints); here
# they are restored first (in a checkout of the code that trained them, on a CPU of the same class: else one line,
# exit 2), and dropped once the piece has finished. A grid resumes only from points this
# checkout's code and settings made, in this machine's precision (pipelines/ablate.py --resume): the others run again.
# A grid longer than a session: `python scripts/park.py save --grid <grid>` commits its finished points to
# claims/parked/grids/<grid>, restored and dropped here the same way (a point in progress starts again).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
retest=0
if [ "${1:-}" = --retest ]; then retest=1; shift; fi
piece=${1:-}
shift || true
if [ "$piece" != task ] && [ "$piece" != grid ] && [ "$piece" != sweep ] || [ $# -eq 0 ]; then
  echo "error: usage: bash scripts/claims.sh [--retest] task <task>... | grid <grid>... | sweep <task>..." >&2
  exit 2
fi
targets=()
for name in "$@"; do
  python -m pipelines.claims --check "$piece" "$name" || exit 2
  targets+=("claims/dvc.yaml:$piece@$name")
  if [ "$piece" = task ] && python -m pipelines.claims --check sample "$name" 2>/dev/null; then
    targets+=("claims/dvc.yaml:sample@$name")
  fi
done
# a task's or a grid's finished work parked in git comes back first and goes once the piece has finished (a sweep
# piece parks nothing: it resumes in its own clone)
flag=()
if [ "$piece" = grid ]; then flag=(--grid); fi
if [ "$piece" != sweep ]; then
  for name in "$@"; do python scripts/park.py restore "${flag[@]}" "$name" || exit 2; done
fi
SWARMLAB_RETEST=$retest dvc repro "${targets[@]}"
if [ "$piece" != sweep ]; then
  for name in "$@"; do python scripts/park.py drop "${flag[@]}" "$name"; done
fi
