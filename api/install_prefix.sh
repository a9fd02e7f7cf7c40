# Sourced by the install tests (api/c, api/cc, api/go): install_prefix BUILD_DIR PREFIX installs
# the build tree into a scratch PREFIX (its log in PREFIX.log, printed on failure) and points
# PKG_CONFIG_PATH at the pkg-config files installed there.
install_prefix() {
  rm -rf "$2"
  cmake --install "$1" --prefix "$2" >"$2.log" 2>&1 || {
    cat "$2.log"
    exit 1
  }
  local pc
  pc=$(find "$2" -name wharf.pc | head -n 1)
  [ -n "$pc" ] || { echo "FAIL: no wharf.pc installed under $2"; exit 1; }
  PKG_CONFIG_PATH="$(dirname "$pc")"
  export PKG_CONFIG_PATH
}
