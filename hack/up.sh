#!/usr/bin/env bash
# Scoria's main job: the embedded mode on this machine — the scheduler and the agent as real processes,
# the demo in daemonset/examples/embedded (an online service under load, offline gang jobs in two queues)
# with a live view in the terminal and in a browser (the web view's address is printed at start) until Ctrl-C
# or --duration SECONDS, a summary, and a clean-up.  Needs root and
# writable cgroups; elsewhere (or with --simulate) it runs the scheduler simulator on the bundled example.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv
cd "$ROOT"
exec "$VENV/bin/python" hack/demo/up.py "$@"
