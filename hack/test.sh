#!/usr/bin/env bash
# Run the checks and the test suite: creates .venv if missing and installs the project with its test
# extras, then runs, each failing the whole run:
#   ruff         lint and import order over the whole tree
#   mypy         types of agent/, scheduler/, proto/ (generated code excluded)
#   lint-imports the layer contracts in pyproject.toml (proto imports neither side, the agent not the
#                scheduler, the scheduler's layers, independent plugins/actions/modes, the wire boundary)
#   pytest       the tests
# Extra arguments go to pytest (e.g. ./hack/test.sh -k gang -x); --no-checks first skips the three checks.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv test
cd "$ROOT"
if [ "${1:-}" = "--no-checks" ]; then
  shift
else
  failed=()
  echo "== ruff" >&2
  "$VENV/bin/ruff" check . || failed+=(ruff)
  echo "== mypy" >&2
  "$VENV/bin/mypy" || failed+=(mypy)
  echo "== lint-imports" >&2
  "$VENV/bin/lint-imports" --no-cache || failed+=(lint-imports)
  if [ ${#failed[@]} -gt 0 ]; then
    echo "error: checks failed: ${failed[*]} (see above); the tests were not run" >&2
    exit 1
  fi
fi
exec "$VENV/bin/python" -m pytest "$@"
