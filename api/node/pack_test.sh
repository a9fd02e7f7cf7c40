#!/bin/sh
# The package as a user gets it: installs the build tree into a scratch prefix, packs api/node
# (`npm pack`), installs the tarball into a scratch project offline (`npm install --offline`: the
# addon is built by npm's node-gyp against Node's own headers, nodedir=/usr, and against the
# installed libwharf found by pkg-config), then runs a program through the ES module and the
# CommonJS entry points, without WHARF_NODE_ADDON or LD_LIBRARY_PATH.
# Usage: pack_test.sh BUILD_DIR SCRATCH_DIR PACKAGE_DIR
set -eu
build=$1
scratch=$2
package=$3
. "$package/../install_prefix.sh"
mkdir -p "$scratch"
install_prefix "$build" "$scratch/prefix"
rm -rf "$scratch/pack" "$scratch/project" "$scratch/db"
mkdir -p "$scratch/pack" "$scratch/project"
# npm's cache and logs stay in the scratch directory (HOME may be read-only in CI).
export npm_config_cache="$scratch/npm-cache" npm_config_nodedir="${NODE_DIR:-/usr}"
export npm_config_update_notifier=false
(cd "$package" && npm pack --silent --pack-destination "$scratch/pack") >"$scratch/pack.log"
tarball=$(ls "$scratch/pack"/wharf-*.tgz)
cd "$scratch/project"
echo '{ "name": "scratch", "version": "1.0.0", "private": true }' >package.json
npm install --offline --no-audit --no-fund --foreground-scripts "$tarball" >"$scratch/install.log" 2>&1 || {
  cat "$scratch/install.log"
  exit 1
}
test -f node_modules/wharf/build/Release/wharf.node ||
  { echo "FAIL: npm install did not build the addon"; cat "$scratch/install.log"; exit 1; }
cat >main.mjs <<'PROGRAM'
import { open, createRuntime } from 'wharf';
const engine = await open(process.argv[2]);
await engine.declareTypes('PushRequested');
await engine.transaction((tx) => { tx.emit('PushRequested', 'hello', { key: 'device-1' }); });
const runtime = createRuntime({ engine });
const sent = [];
runtime.subscribe('push-delivery', ['PushRequested'], async (fact) => {
  sent.push(fact.payload.toString());
});
await runtime.drain();
await engine.close();
console.log(`pushed: ${sent.join(',')}`);
PROGRAM
echo 'console.log(`wharf ${require("wharf").version()}`);' >main.cjs
env -u WHARF_NODE_ADDON -u LD_LIBRARY_PATH node main.mjs "$scratch/db" | tee "$scratch/out.txt"
grep -qx 'pushed: hello' "$scratch/out.txt" || { echo "FAIL: the subscriber did not run"; exit 1; }
env -u WHARF_NODE_ADDON -u LD_LIBRARY_PATH node main.cjs | grep -qx "wharf ${WHARF_EXPECTED_VERSION:-.*}" ||
  { echo "FAIL: require('wharf').version()"; exit 1; }
echo "npm pack + npm install --offline: ok"
