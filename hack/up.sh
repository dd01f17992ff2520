#!/usr/bin/env bash
# Scoria's main job. For now: run the scheduler simulator on the bundled example
# cluster and workload (daemonset/examples/simulator) and print the placement table.
# Extra arguments go to `python -m scheduler simulate` (e.g. -o json).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv
cd "$ROOT"
exec "$VENV/bin/python" -m scheduler simulate -f daemonset/examples/simulator "$@"
