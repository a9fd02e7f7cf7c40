#!/bin/sh
# Fails (and prints the lines) when a source of the CLI includes anything but the public headers
# (wharf/*.h, wharf.h), the wire-format library (engine/wire/*.h), its own headers
# (tools/cli/*.h) or system/third-party headers (<...>): the CLI is a user of the library like any
# other, never of engine/ or io/ internals. engine/wire is the one exception, and only because it
# is no internal: it includes nothing but the public headers (tools/check_layers.py puts it just
# above them), and holds the JSON writer and the field lists of the public types that the admin
# socket and the CLI's --json output share, so that the CLI needs no copy of either.
# Usage: check_cli_includes.sh CLI_SOURCE_DIR
set -eu
dir=$1
bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir"/*.cc "$dir"/*.h |
  grep -vE '#[[:space:]]*include[[:space:]]*"(wharf/[a-z_]+\.h|wharf\.h|engine/wire/[a-z_]+\.h|tools/cli/[a-z_]+\.h)"' ||
  true)
if [ -n "$bad" ]; then
  echo "FAIL: the CLI includes internal headers (use the public API in api/include):"
  echo "$bad"
  exit 1
fi
echo "OK: $dir includes only public headers and engine/wire"
