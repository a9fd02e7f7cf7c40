'use strict';
// Runtime: delivers durable facts to projections, reactions, subscribers and taps, whose handlers
// run on this (the JavaScript) thread. See src/runtime.h for how calls cross from wharf's worker
// threads and why a projection's worker waits for its JavaScript handler.
const { EventEmitter } = require('node:events');
const binding = require('./binding');
const check = require('./validate');
const { InvalidArgument } = require('./errors');
const { emitArgs } = require('./engine');
const lifecycle = require('./lifecycle');

// What a handler may answer (wharf_outcome): undefined or true is HANDLED, false FAILED.
const Outcome = Object.freeze({ HANDLED: 0, REJECTED: 1, FAILED: 2, RETRY: 3 });
const TRACE_LEVELS = ['info', 'warning', 'error'];

function reasonOf(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  try {
    return `thrown: ${String(error)}`;
  } catch {
    return 'thrown: a value without text';
  }
}

// [outcome, reason] for what a handler returned or resolved to.
function outcomeOf(value) {
  if (value === undefined || value === true) return [Outcome.HANDLED, ''];
  if (value === false) return [Outcome.FAILED, 'the handler returned false'];
  if (value === Outcome.REJECTED || value === Outcome.FAILED || value === Outcome.RETRY ||
      value === Outcome.HANDLED) {
    return [value, ''];
  }
  return [Outcome.FAILED, `the handler returned ${check.describe(value)}, not an Outcome`];
}

// A projection's or reaction's effects: written (and read) in the transaction that commits with
// the consumer's cursor. Usable until the handler returns (or its promise settles).
class Effects {
  #native;
  #token;
  #react;

  constructor(native, token, react) {
    this.#native = native;
    this.#token = token;
    this.#react = react;
  }

  put(table, key, value) {
    binding.effects(this.#native, this.#token, 'put', check.name(table, 'table'),
      check.bytes(key, 'key'), check.bytes(value, 'value'));
  }

  delete(table, key) {
    binding.effects(this.#native, this.#token, 'delete', check.name(table, 'table'),
      check.bytes(key, 'key'));
  }

  // State as the handler's batch sees it (committed state and the batch's effects so far).
  get(table, key) {
    return binding.effects(this.#native, this.#token, 'get', check.name(table, 'table'),
      check.bytes(key, 'key'));
  }

  // Reactions only: a fact emitted with the effects (its source is the reaction).
  emit(type, payload, options) {
    if (!this.#react) throw new InvalidArgument('a projection cannot emit: register a reaction');
    binding.effects(this.#native, this.#token, 'emit', ...emitArgs(type, payload, options));
  }
}

const KINDS = new Set(['project', 'react', 'subscribe', 'tap']);

// Consumer options (camelCase) to wharf's "key=value;..." (see wharf_runtime_subscribe_async).
function consumerOptions(options) {
  return check.optionString(check.object(options, 'options'), 'options');
}

class Runtime extends EventEmitter {
  #engine;
  #options;
  #native = null;
  #registrations = [];
  #started = false;
  #dispatch;

  constructor(engine, options) {
    super();
    this.#engine = engine;
    this.#options = options;
    this.#dispatch = (kind, a, b, c, d, e, f) => this.#onEvent(kind, a, b, c, d, e, f);
  }

  get engine() { return this.#engine; }

  // --- Registration (before start() or drain()).
  #register(kind, id, types, fn, options) {
    check.name(id, 'id');
    const typeList = check.names(types, 'types');
    check.func(fn, 'handler');
    const text = consumerOptions(options);
    if (this.#native !== null) {
      throw new InvalidArgument(`${id}: register consumers before start() or drain()`);
    }
    if (this.#registrations.some((registration) => registration.id === id)) {
      throw new InvalidArgument(`id '${id}' is already registered`);
    }
    this.#registrations.push({ kind, id, types: typeList, fn, options: text });
    return this;
  }

  // (fact, effects) => ...: effects commit with the cursor, exactly once. It may return a promise
  // (its worker waits: see README).
  project(id, types, fn, options) { return this.#register('project', id, types, fn, options); }
  // As project; effects.emit() emits facts with the effects.
  react(id, types, fn, options) { return this.#register('react', id, types, fn, options); }
  // async (fact) => ...: at least once. The cursor passes a fact once the promise resolves; a
  // throw or rejection fails the delivery (retried with backoff; maxAttempts: then a dead letter).
  // options: keyConcurrency, maxAttempts, handlerTimeoutMs, keyWindowFacts, batchFacts...
  subscribe(id, types, fn, options) {
    return this.#register('subscribe', id, types, fn, options);
  }
  // (fact) => ...: live facts, at most once, no cursor.
  tap(id, types, fn, options) { return this.#register('tap', id, types, fn, options); }

  // --- Control.
  #createNative(startOptions) {
    const { leaseMs, renewMs, workers, instance, ...rest } = this.#options;
    const options = { ...rest, instance, leaseMs, renewMs, workers };
    if (startOptions.leaseMs !== undefined) options.leaseMs = startOptions.leaseMs;
    if (startOptions.renewMs !== undefined) options.renewMs = startOptions.renewMs;
    if (startOptions.workers === false) options.workers = 0;
    else if (typeof startOptions.workers === 'number') options.workers = startOptions.workers;
    for (const key of ['leaseMs', 'renewMs', 'workers']) {
      if (options[key] !== undefined) {
        check.integer(options[key], key, 0, key === 'workers' ? 1024 : Number.MAX_SAFE_INTEGER);
      }
    }
    if (options.instance !== undefined) check.name(options.instance, 'instance');
    const native = binding.runtimeNew(this.#engine._native(),
      check.optionString(options, 'options'), this.#dispatch);
    try {
      this.#registrations.forEach((registration, index) => {
        binding.runtimeRegister(native, registration.kind, registration.id, registration.types,
          registration.options, index);
      });
    } catch (error) {
      binding.runtimeShutdown(native);
      throw error;
    }
    this.#native = native;
    lifecycle.runtimes.add(this);
  }

  // Starts delivering: { leaseMs, renewMs } (defaults 30000, 10000; renewMs < leaseMs), or
  // { workers: false } for an API-only instance that delivers nothing. A started runtime keeps
  // the process alive until stop(); SIGINT/SIGTERM stop it (handleSignals: false to opt out).
  async start(options) {
    const startOptions = check.object(options, 'options');
    const { handleSignals = true } = startOptions;
    if (this.#started) throw new InvalidArgument('the runtime is already started');
    if (this.#native !== null) this._shutdownSync();  // made by drain(): made again with these
    this.#createNative(startOptions);
    this.#started = true;
    try {
      await binding.runtimeControl(this.#native, 'start');
    } catch (error) {
      this._shutdownSync();
      throw error;
    }
    if (startOptions.workers !== false) {
      binding.runtimeKeepAlive(this.#native, true);
      if (handleSignals) lifecycle.addStarted(this);
    }
    return this;
  }

  // Delivers everything pending to every durable consumer and resolves once all are caught up
  // (started or not; ignores leases: for tests and tools).
  async drain() {
    if (this.#native === null) this.#createNative({});
    await binding.runtimeControl(this.#native, 'drain');
  }

  // Finishes what is in flight, persists cursors, releases leases. Idempotent.
  async stop() {
    if (this.#native === null) return;
    const native = this.#native;
    lifecycle.removeStarted(this);
    await binding.runtimeControl(native, 'stop');
    if (this.#native === native) this._shutdownSync();
  }

  get instance() {
    if (this.#native === null) return this.#options.instance;
    return binding.runtimeInstance(this.#native);
  }

  _shutdownSync() {
    if (this.#native === null) return;
    const native = this.#native;
    this.#native = null;
    this.#started = false;
    lifecycle.runtimes.delete(this);
    lifecycle.removeStarted(this);
    binding.runtimeShutdown(native);
  }

  // --- Events from wharf's threads (src/runtime.cc EventCallJs).
  #onEvent(kind, a, b, c, d, e, f) {
    switch (kind) {
      case 'deliveries': return this.#onDeliveries(a, b, c, d, e);
      case 'project': return this.#projectCall(a, b, c);
      case 'tap': return this.#tapCall(a, b);
      case 'trace':
        return this.emit('trace', {
          level: TRACE_LEVELS[a] ?? String(a), name: b, consumer: c, factId: d, reason: e,
          attempt: f,
        });
      default: return undefined;
    }
  }

  // A batch of subscriber deliveries (src/runtime.cc DeliveriesToJs): key and payload are views
  // of one Buffer per batch.
  #onDeliveries(count, bytes, numbers, strings, headers) {
    let offset = 0;
    for (let i = 0; i < count; i++) {
      const n = i * 13;
      const keyEnd = offset + numbers[n + 3];
      const payloadEnd = keyEnd + numbers[n + 4];
      const fact = {
        id: numbers[n + 2],
        type: strings[2 * i],
        key: bytes.subarray(offset, keyEnd),
        payload: bytes.subarray(keyEnd, payloadEnd),
        headers: headers[i] ?? {},
        source: strings[2 * i + 1],
        v: numbers[n + 5],
        storedV: numbers[n + 6],
        depth: numbers[n + 7],
        partition: numbers[n + 8],
        commitMs: numbers[n + 9],
        deliverAtMs: numbers[n + 10],
        scheduledId: numbers[n + 11],
        attempt: numbers[n + 12],
      };
      offset = payloadEnd;
      this.#subscribeCall(numbers[n], fact, numbers[n + 1]);
    }
  }

  // Settled deliveries go to the addon once per event-loop turn (setImmediate), in one call.
  #settled = [];
  #flushSettled = () => {
    const settled = this.#settled;
    this.#settled = [];
    if (this.#native !== null) binding.deliveriesDone(this.#native, settled);
  };

  #settle(delivery, outcome, reason) {
    if (this.#settled.length === 0) setImmediate(this.#flushSettled);
    this.#settled.push(delivery, outcome, reason);
  }

  #handlerError(registration, fact, error) {
    if (this.listenerCount('handlerError') > 0) {
      this.emit('handlerError', { id: registration.id, fact, error });
    }
  }

  #subscribeCall(index, fact, delivery) {
    const registration = this.#registrations[index];
    const settle = (outcome, reason) => this.#settle(delivery, outcome, reason);
    const fail = (error) => {
      this.#handlerError(registration, fact, error);
      settle(Outcome.FAILED, reasonOf(error));
    };
    let result;
    try {
      result = registration.fn(fact);
    } catch (error) {
      fail(error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
      result.then((value) => settle(...outcomeOf(value)), fail);
    } else {
      settle(...outcomeOf(result));
    }
  }

  #projectCall(index, fact, token) {
    const registration = this.#registrations[index];
    const native = this.#native;
    const settle = (outcome, reason) => binding.projectDone(native, token, outcome, reason);
    const fail = (error) => {
      this.#handlerError(registration, fact, error);
      settle(Outcome.FAILED, reasonOf(error));
    };
    let result;
    try {
      result = registration.fn(fact, new Effects(native, token, registration.kind === 'react'));
    } catch (error) {
      fail(error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
      result.then((value) => settle(...outcomeOf(value)), fail);
    } else {
      settle(...outcomeOf(result));
    }
  }

  #tapCall(index, fact) {
    const registration = this.#registrations[index];
    try {
      const result = registration.fn(fact);
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        result.then(undefined, (error) => this.#handlerError(registration, fact, error));
      }
    } catch (error) {
      this.#handlerError(registration, fact, error);
    }
  }
}

// createRuntime({ engine, instance, leaseMs, renewMs, workers, ...options }): `instance` names this
// process for leases (default: a random UUID); other keys are wharf_runtime_new's options
// (camelCase or snake_case).
function createRuntime(options) {
  const { engine, ...rest } = check.object(options, 'options');
  if (engine === undefined || typeof engine._native !== 'function') {
    throw new InvalidArgument('options.engine must be an Engine from open()');
  }
  engine._native();  // Closed when it was closed
  return new Runtime(engine, rest);
}

module.exports = { createRuntime, Runtime, Effects, Outcome, KINDS };
