#!/usr/bin/env bash
# Before/after benchmark runs, interleaved (b a b a ...), for the figures quoted in the README and in closing
# notes: the code at REV ("before", checked out in a temporary worktree) against this tree ("after"), both
# with this tree's .venv.  One JSON file per run under OUT (default ./bench-out), stderr beside it.
#
#   hack/bench/compare.sh REV GROUP...      (as root: colo, react and ovh use real cgroups)
#   groups: sched fleet5k fleet5kraw fleet10k ovh react colo kw kmode jobs
#   (kw, kmode and jobs have no "before" where REV lacks the benchmark: only this tree is run)
set -u
[ $# -ge 2 ] || { echo "usage: $0 REV GROUP..." >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}  # ./hack/test.sh or ./hack/up.sh make it
OUT=${OUT:-$ROOT/bench-out}; mkdir -p "$OUT"
REV=$1; shift
BASE=$(mktemp -d /tmp/scoria-before-XXXXXX)
git -C "$ROOT" worktree add --detach -q "$BASE" "$REV" || exit 2
trap 'git -C "$ROOT" worktree remove --force "$BASE"' EXIT
run() {  # tag tree args...
  local tag=$1 tree=$2; shift 2
  echo "== $(date +%T) $tag: $*" >&2
  (cd "$tree" && PYTHONPATH="$tree" timeout 1800 "$PY" "$@") > "$OUT/$tag.json" 2> "$OUT/$tag.err"
  echo "   rc=$? $(tail -c 300 "$OUT/$tag.json" | tr -d '\n')" >&2
}
both() {  # tag args... : before then after
  local tag=$1; shift
  run "$tag-before" "$BASE" "$@"
  run "$tag-after" "$ROOT" "$@"
}
for g in "$@"; do case $g in
  sched) for s in 1 2 3; do for p in default full; do
           both "sched-$p-$s" hack/bench/scheduler.py --seed "$s" --profile "$p"; done; done ;;
  fleet5k) for i in 1 2 3; do both "fleet5k-$i" hack/bench/fleet.py --nodes 5000 --warmup 10 --seconds 20; done ;;
  fleet5kraw) for i in 1 2 3; do
           run "fleet5kraw-$i-before" "$BASE" hack/bench/fleet.py --nodes 5000 --warmup 10 --seconds 20
           run "fleet5kraw-$i-after" "$ROOT" hack/bench/fleet.py --nodes 5000 --warmup 10 --seconds 20 \
               --sender raw --no-deltas; done ;;
  fleet10k) for i in 1 2 3; do both "fleet10k-$i" hack/bench/fleet.py --nodes 10000 --warmup 20 --seconds 20; done ;;
  ovh) for i in 1 2 3; do both "ovh-$i" hack/bench/agent_overhead.py --seconds 30; done ;;
  react) for i in 1 2 3; do both "react-$i" hack/bench/qos_reaction.py --steps 30; done ;;
  colo) for i in 1 2 3; do both "colo-$i" hack/bench/colocation.py; done ;;
  kw) for i in 1 2 3; do run "kw-$i-after" "$ROOT" hack/bench/kube_workloads.py --seed "$i"; done ;;
  kmode) for i in 1 2 3; do run "kmode-$i-after" "$ROOT" hack/bench/kube_mode.py; done ;;
  jobs) for i in 1 2 3; do run "jobs-$i-after" "$ROOT" hack/bench/jobs.py; done ;;
  *) echo "unknown group $g" >&2 ;;
esac; done
