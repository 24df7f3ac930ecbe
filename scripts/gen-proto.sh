#!/usr/bin/env bash
# Generates the gRPC stubs from proto/ into cdc/api/gen (never edit them by hand).
# Run by scripts/bootstrap.sh; run it yourself after changing a .proto file.
set -euo pipefail
cd "$(dirname "$0")/.."
out=cdc/api/gen
mkdir -p "$out"
.venv/bin/python -m grpc_tools.protoc -Iproto \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" proto/cdc/v1/*.proto
# protoc writes `from cdc.v1 import x_pb2`; the package lives at cdc.api.gen.cdc.v1.
find "$out" -name '*.py' -exec sed -i -E 's/^from cdc\.v1 import/from cdc.api.gen.cdc.v1 import/' {} +
for d in "$out" "$out/cdc" "$out/cdc/v1"; do [ -f "$d/__init__.py" ] || : > "$d/__init__.py"; done
