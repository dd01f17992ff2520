# Shared by the hack/ scripts: make sure .venv exists with the project installed.
# Re-installs when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"

ensure_venv() {
  local extras="${1:-}"
  local stamp="$VENV/.scoria-installed${extras:+-$extras}"
  # An install with the test extras also serves a plain one.
  if [ -z "$extras" ] && [ -f "$VENV/.scoria-installed-test" ] && [ ! "$ROOT/pyproject.toml" -nt "$VENV/.scoria-installed-test" ]; then
    stamp="$VENV/.scoria-installed-test"
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
    local log="$VENV/install.log"
    echo "installing Scoria into $VENV (log: $log)..." >&2
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT${extras:+[$extras]}" >"$log" 2>&1; then
      tail -n 30 "$log" >&2
      echo "error: installing the project into $VENV failed (full log: $log)" >&2
      exit 1
    fi
    touch "$stamp"
  fi
}
