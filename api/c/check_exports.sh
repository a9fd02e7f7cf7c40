#!/bin/sh
# Checks the dynamic symbol table of libwharf.so against wharf.h:
#  1. nothing but wharf_* functions (and the WHARF_* version nodes) is exported;
#  2. every function wharf.h declares with WHARF_EXPORT is exported, and nothing else is.
# Usage: check_exports.sh LIBRARY HEADER
set -eu
lib=$1
header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/all"
grep -v -e '^wharf_' -e '^WHARF_' "$tmp/all" >"$tmp/foreign" || true
if [ -s "$tmp/foreign" ]; then
  echo "FAIL: $lib exports symbols outside the C ABI:"
  head -n 20 "$tmp/foreign"
  echo "($(wc -l <"$tmp/foreign") in all)"
  exit 1
fi

grep '^wharf_' "$tmp/all" >"$tmp/exported" || true
# One declaration per WHARF_EXPORT ... ; the function name is the identifier before its '('.
tr '\n' ' ' <"$header" | sed 's/WHARF_EXPORT/\n&/g' | grep '^WHARF_EXPORT' | cut -d';' -f1 |
  sed -n 's/^[^(]*[^a-z0-9_]\(wharf_[a-z0-9_]*\)[[:space:]]*(.*/\1/p' | sort -u >"$tmp/declared"
if [ ! -s "$tmp/declared" ]; then
  echo "FAIL: found no WHARF_EXPORT declarations in $header"
  exit 1
fi
if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/diff"; then
  echo "FAIL: exported functions differ from wharf.h (- declared only, + exported only):"
  cat "$tmp/diff"
  exit 1
fi
echo "OK: $(wc -l <"$tmp/exported") wharf_* functions exported, nothing else"
