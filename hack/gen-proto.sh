#!/usr/bin/env bash
# Regenerate the Python modules for proto/**/*.proto with grpcio-tools (the version in .venv).
# A test fails when the committed modules differ from what this produces.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_venv
cd "$ROOT"
mapfile -t protos < <(find proto -name '*.proto' | sort)
"$VENV/bin/python" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. "${protos[@]}"
echo "generated: ${protos[*]}"
