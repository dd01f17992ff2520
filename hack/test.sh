#!/usr/bin/env bash
# Run the test suite: creates .venv if missing, installs the project with its test extras, runs pytest.
# Extra arguments go to pytest (e.g. ./hack/test.sh -k gang -x).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv test
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
