'use strict';
// Loads the addon (wharf.node): WHARF_NODE_ADDON when set (a build tree's addon: the tests), else
// the one `npm install` built with node-gyp (build/Release/wharf.node).
const path = require('node:path');
const errors = require('./errors');

function load() {
  const explicit = process.env.WHARF_NODE_ADDON;
  const file = explicit || path.join(__dirname, '..', 'build', 'Release', 'wharf.node');
  try {
    return require(file);
  } catch (error) {
    error.message = `wharf: cannot load the addon ${file} (${error.message}); build it with ` +
      '`npm install` (node-gyp, against libwharf found by pkg-config) or set WHARF_NODE_ADDON';
    throw error;
  }
}

const binding = load();
binding.setErrorFactory(errors.fromStatus);
module.exports = binding;
