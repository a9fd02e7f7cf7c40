// ES module entry point: the CommonJS implementation (lib/index.js), re-exported by name.
import wharf from './lib/index.js';

export const {
  open, createRuntime, Engine, Transaction, Runtime, Effects, Outcome, version, WharfError,
  InvalidArgument, NotFound, IOError, Corruption, Busy, Closed, Conflict, ReadConflict,
  NotSupported, InternalError,
} = wharf;
export default wharf;
