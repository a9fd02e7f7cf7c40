#!/bin/sh
# Fails (and prints the lines) when a source of the CLI includes anything but the public headers
# (wharf/*.h, wharf.h), its own headers (tools/cli/*.h) or system/third-party headers (<...>):
# the CLI is a user of the library like any other, never of engine/ or io/ internals.
# Usage: check_cli_includes.sh CLI_SOURCE_DIR
set -eu
dir=$1
bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir"/*.cc "$dir"/*.h |
  grep -vE '#[[:space:]]*include[[:space:]]*"(wharf/[a-z_]+\.h|wharf\.h|tools/cli/[a-z_]+\.h)"' ||
  true)
if [ -n "$bad" ]; then
  echo "FAIL: the CLI includes internal headers (use the public API in api/include):"
  echo "$bad"
  exit 1
fi
echo "OK: $dir includes only public headers"
