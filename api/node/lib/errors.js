'use strict';
// Errors: one Error subclass per wharf_status (wharf.h), each carrying `code` (the C name as a
// string, 'WHARF_CONFLICT'), `status` (its number) and `subcode` ('READ_CONFLICT', 'NONE'...).
// Programs branch on `code` and `subcode`, never on the message.

const STATUS_NAMES = [
  'OK', 'INVALID_ARGUMENT', 'NOT_FOUND', 'IO_ERROR', 'CORRUPTION', 'BUSY', 'CLOSED', 'CONFLICT',
  'NOT_SUPPORTED', 'INTERNAL',
];
const SUBCODE_NAMES = [
  'NONE', 'LEASE_FENCED', 'CURSOR_MOVED', 'DATABASE_LOCKED', 'ALREADY_EXISTS', 'TIMED_OUT',
  'READ_CONFLICT', 'PRIMARY_FENCED',
];

class WharfError extends Error {
  constructor(message, status = 9, subcode = 0) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = `WHARF_${STATUS_NAMES[status] ?? 'INTERNAL'}`;
    this.subcode = SUBCODE_NAMES[subcode] ?? `SUBCODE_${subcode}`;
  }
}
// Bad input from the caller: the message names the argument.
class InvalidArgument extends WharfError {
  constructor(message, subcode = 0) { super(message, 1, subcode); }
}
class NotFound extends WharfError {
  constructor(message, subcode = 0) { super(message, 2, subcode); }
}
class IOError extends WharfError {
  constructor(message, subcode = 0) { super(message, 3, subcode); }
}
class Corruption extends WharfError {
  constructor(message, subcode = 0) { super(message, 4, subcode); }
}
class Busy extends WharfError {
  constructor(message, subcode = 0) { super(message, 5, subcode); }
}
class Closed extends WharfError {
  constructor(message, subcode = 0) { super(message, 6, subcode); }
}
class Conflict extends WharfError {
  constructor(message, subcode = 0) { super(message, 7, subcode); }
}
// A transaction's reads changed before it committed: engine.transaction() runs it again.
class ReadConflict extends Conflict {
  constructor(message) { super(message, 6); }
}
class NotSupported extends WharfError {
  constructor(message, subcode = 0) { super(message, 8, subcode); }
}
class InternalError extends WharfError {
  constructor(message, subcode = 0) { super(message, 9, subcode); }
}

const BY_STATUS = [
  null, InvalidArgument, NotFound, IOError, Corruption, Busy, Closed, Conflict, NotSupported,
  InternalError,
];

// The error for a wharf_status (called by the addon with what wharf_last_error() said).
function fromStatus(status, subcode, message) {
  if (status === 7 && subcode === 6) return new ReadConflict(message);
  const Class = BY_STATUS[status] ?? InternalError;
  const error = new Class(message, subcode);
  if (Class === InternalError) error.status = status;
  return error;
}

module.exports = {
  WharfError, InvalidArgument, NotFound, IOError, Corruption, Busy, Closed, Conflict,
  ReadConflict, NotSupported, InternalError, fromStatus, STATUS_NAMES, SUBCODE_NAMES,
};
