'use strict';
// Engine and Transaction: the database, and the writes and facts that commit together.
const binding = require('./binding');
const check = require('./validate');
const { InvalidArgument, ReadConflict, Closed } = require('./errors');
const lifecycle = require('./lifecycle');

const EMPTY = Buffer.alloc(0);
const SCAN_LIMIT_MAX = 100000;
const TRANSACTION_ATTEMPTS = 16;

function emitArgs(type, payload, options) {
  check.name(type, 'type');
  check.bytes(payload, 'payload');
  const { key = EMPTY, headers, v = 0, deliverAtMs = 0 } = check.object(options, 'options');
  check.bytes(key, 'options.key');
  const headerNames = [];
  const headerValues = [];
  if (headers !== undefined) {
    for (const [header, value] of Object.entries(check.object(headers, 'options.headers'))) {
      headerNames.push(check.name(header, 'options.headers name'));
      headerValues.push(check.bytes(value, `options.headers['${header}']`));
    }
  }
  check.integer(v, 'options.v', 0, check.U32_MAX);
  check.integer(deliverAtMs, 'options.deliverAtMs', 0, Number.MAX_SAFE_INTEGER);
  return [type, key, payload, headerNames, headerValues, deliverAtMs, v];
}

function scanArgs(table, options) {
  check.name(table, 'table');
  const { prefix = EMPTY, from = EMPTY, to = EMPTY, limit = 1000 } =
    check.object(options, 'options');
  check.bytes(prefix, 'options.prefix');
  check.bytes(from, 'options.from');
  check.bytes(to, 'options.to');
  check.integer(limit, 'options.limit', 1, SCAN_LIMIT_MAX);
  return [table, prefix, from, to, limit];
}

// A transaction being built: put/delete/emit and its snapshot reads run at once (in memory, on
// this thread); commit() hands it to the committer and resolves once it is durable.
class Transaction {
  #handle;
  #emits = 0;

  constructor(handle) { this.#handle = handle; }

  #live() {
    if (this.#handle === null) {
      throw new InvalidArgument('the transaction was already committed or aborted');
    }
    return this.#handle;
  }

  put(table, key, value) {
    binding.txnPut(this.#live(), check.name(table, 'table'), check.bytes(key, 'key'),
      check.bytes(value, 'value'));
  }

  delete(table, key) {
    binding.txnDelete(this.#live(), check.name(table, 'table'), check.bytes(key, 'key'));
  }

  // Emits a fact of a declared type; returns its index among this transaction's facts (the
  // commit's ids[index] is its id).
  emit(type, payload, options) {
    binding.txnEmit(this.#live(), ...emitArgs(type, payload, options));
    return this.#emits++;
  }

  // Reads from the transaction's snapshot, overlaid with its own writes (recorded: a concurrent
  // write of the key makes the commit a ReadConflict). undefined when absent.
  get(table, key) {
    return binding.txnGet(this.#live(), check.name(table, 'table'), check.bytes(key, 'key'));
  }

  scan(table, options) {
    return binding.txnScan(this.#live(), ...scanArgs(table, options));
  }

  // Resolves to { firstId, lastId, ids } once durable (ids: the facts' ids in emit order).
  async commit() {
    const handle = this.#live();
    this.#handle = null;
    const [firstId, lastId] = await binding.txnCommit(handle);
    const ids = [];
    // A transaction's facts get consecutive ids, first to last.
    if (firstId !== 0 && lastId - firstId + 1 === this.#emits) {
      for (let id = firstId; id <= lastId; id++) ids.push(id);
    }
    return { firstId, lastId, ids };
  }

  abort() {
    if (this.#handle === null) return;
    binding.txnAbort(this.#handle);
    this.#handle = null;
  }
}

class Engine {
  #handle;
  #path;

  constructor(handle, path) {
    this.#handle = handle;
    this.#path = path;
    lifecycle.engines.add(this);
  }

  get path() { return this.#path; }
  get closed() { return this.#handle === null; }

  // The addon's handle (for Runtime), or Closed.
  _native() {
    if (this.#handle === null) throw new Closed('engine was closed');
    return this.#handle;
  }

  begin() { return new Transaction(binding.txnBegin(this._native())); }

  // Runs `fn(tx)` (may be async) in a new transaction and commits it; resolves to
  // { firstId, lastId, ids, result } once durable (`result`: what fn returned). A throw aborts.
  // A ReadConflict (what fn read changed before the commit) runs fn again, up to `attempts` times.
  async transaction(fn, options) {
    check.func(fn, 'fn');
    const { attempts = TRANSACTION_ATTEMPTS } = check.object(options, 'options');
    check.integer(attempts, 'options.attempts', 1, 1000);
    for (let attempt = 1; ; attempt++) {
      const tx = this.begin();
      let result;
      try {
        result = await fn(tx);
      } catch (error) {
        tx.abort();
        throw error;
      }
      try {
        const commit = await tx.commit();
        commit.result = result;
        return commit;
      } catch (error) {
        if (!(error instanceof ReadConflict) || attempt >= attempts) throw error;
        const backoffMs = Math.min(100, 2 ** attempt) * Math.random();
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
      }
    }
  }

  // Durable state: a Buffer, or undefined when the key is absent.
  get(table, key) {
    return binding.get(this._native(), check.name(table, 'table'), check.bytes(key, 'key'));
  }

  // Up to options.limit rows (1000) of `table` in key order within { prefix, from, to }:
  // { rows: [{ key, value }], more } (more: continue from the last key + '\0').
  scan(table, options) {
    return binding.scan(this._native(), ...scanArgs(table, options));
  }

  declareTypes(...types) {
    return binding.declareTypes(this._native(), check.names(types.flat(), 'types'));
  }

  declareType(type, version) {
    return binding.declareType(this._native(), check.name(type, 'type'),
      check.integer(version, 'version', 1, check.U32_MAX));
  }

  get durableLsn() { return binding.engineInfo(this._native(), 'durableLsn'); }
  get lastLsn() { return binding.engineInfo(this._native(), 'lastLsn'); }
  get partitions() { return binding.engineInfo(this._native(), 'partitions'); }
  partitionOf(key) { return binding.partitionOf(this._native(), check.bytes(key, 'key')); }

  // --- Administration (wharf.h ADMINISTRATION): each resolves once done.
  cursor(consumer, partition) {
    return binding.cursorGet(this._native(), check.name(consumer, 'consumer'),
      check.integer(partition, 'partition', 0, check.U32_MAX));
  }
  cursors() { return binding.cursorList(this._native()); }
  setCursor(consumer, factId) {
    return binding.cursorSet(this._native(), check.name(consumer, 'consumer'),
      check.integer(factId, 'factId', 0, Number.MAX_SAFE_INTEGER));
  }
  copyCursor(from, to, options) {
    const { force = false } = check.object(options, 'options');
    return binding.cursorCopy(this._native(), check.name(from, 'from'), check.name(to, 'to'),
      force === true);
  }
  deleteCursor(consumer) {
    return binding.cursorDelete(this._native(), check.name(consumer, 'consumer'));
  }
  deadLetters(consumer) {
    if (consumer !== undefined) check.name(consumer, 'consumer');
    return binding.deadLetters(this._native(), consumer ?? '');
  }
  purgeDeadLetters(consumer, factIds = []) {
    return binding.deadPurge(this._native(), check.name(consumer, 'consumer'), factIds);
  }
  retryDeadLetters(consumer, factIds = []) {
    return binding.deadRetry(this._native(), check.name(consumer, 'consumer'), factIds);
  }
  leases() { return binding.leaseList(this._native()); }
  releaseLease(consumer) {
    return binding.leaseRelease(this._native(), check.name(consumer, 'consumer'));
  }
  trim(options) {
    const { dryRun = false } = check.object(options, 'options');
    return binding.trim(this._native(), dryRun === true);
  }
  stat() { return binding.stat(this._native()); }

  // --- Metrics: [{ name, labels, value }] (Prometheus samples), or the Prometheus text.
  metrics() { return binding.metrics(this._native()); }
  metricsText() { return binding.metricsText(this._native()); }

  // Stops the runtimes of this engine, waits for queued commits, closes the database.
  async close() {
    if (this.#handle === null) return;
    await lifecycle.stopRuntimesOf(this);
    const handle = this.#handle;
    this.#handle = null;
    lifecycle.engines.delete(this);
    await binding.close(handle);
  }

  // Process exit: no promise can settle any more.
  _closeSync() {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    lifecycle.engines.delete(this);
    binding.closeSync(handle);
  }
}

// Opens (or creates) the database in directory `path`. `options`: an object ({ partitions: 4,
// durability: 'sync' }, camelCase or snake_case keys) or wharf's "key=value;..." string.
async function open(path, options) {
  if (typeof path !== 'string' || path.length === 0) {
    throw new InvalidArgument(`path must be a non-empty string, got ${check.describe(path)}`);
  }
  if (path.includes('\0')) throw new InvalidArgument('path must not contain a NUL character');
  const handle = await binding.open(path, check.optionString(options, 'options'));
  return new Engine(handle, path);
}

module.exports = { open, Engine, Transaction, emitArgs };
