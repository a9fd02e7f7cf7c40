'use strict';
// wharf: the Node.js binding of Wharf, an embedded transactional-outbox engine (over its C ABI).
const errors = require('./errors');
const { open, Engine, Transaction } = require('./engine');
const { createRuntime, Runtime, Effects, Outcome } = require('./runtime');
const binding = require('./binding');

module.exports = {
  open,
  createRuntime,
  Engine,
  Transaction,
  Runtime,
  Effects,
  Outcome,
  version: binding.version,
  WharfError: errors.WharfError,
  InvalidArgument: errors.InvalidArgument,
  NotFound: errors.NotFound,
  IOError: errors.IOError,
  Corruption: errors.Corruption,
  Busy: errors.Busy,
  Closed: errors.Closed,
  Conflict: errors.Conflict,
  ReadConflict: errors.ReadConflict,
  NotSupported: errors.NotSupported,
  InternalError: errors.InternalError,
};
