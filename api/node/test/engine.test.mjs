// The engine from Node: transactions resolve to their facts' ids once durable, reads see them,
// bad input is refused naming the argument (never passed to the C ABI cut short or rounded), and
// errors are Error subclasses carrying the C ABI's code and subcode.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import test from 'node:test';
import * as wharf from '../index.mjs';
import { scratch } from './helpers.mjs';

const require = createRequire(import.meta.url);

test('ESM and CommonJS entry points export the same API', () => {
  const cjs = require('../lib/index.js');
  assert.equal(cjs.open, wharf.open);
  assert.equal(cjs.createRuntime, wharf.createRuntime);
  assert.match(wharf.version(), /^\d+\.\d+\.\d+$/);
});

test('a transaction commits state and facts atomically and resolves to their ids', async () => {
  const engine = await wharf.open(scratch('txn'), { partitions: 4 });
  try {
    await engine.declareTypes('OrderPlaced', 'OrderShipped');
    const commit = await engine.transaction((tx) => {
      tx.put('orders', 'o-1', Buffer.from('{"cents":1250}'));
      tx.emit('OrderPlaced', 'o-1', { key: 'alice', headers: { trace: 'abc' } });
      tx.emit('OrderShipped', Buffer.from([0, 1, 2]), { key: Buffer.from([0, 255]) });
      return 'built';
    });
    assert.equal(commit.result, 'built');
    assert.equal(commit.ids.length, 2);
    assert.equal(commit.lastId, commit.firstId + 1);
    assert.ok(engine.durableLsn >= commit.lastId);
    assert.deepEqual(await engine.get('orders', 'o-1'), Buffer.from('{"cents":1250}'));
    assert.equal(await engine.get('orders', 'nope'), undefined);

    // A throwing transaction function commits nothing.
    await assert.rejects(engine.transaction((tx) => {
      tx.put('orders', 'o-2', 'x');
      throw new Error('no');
    }), /no/);
    assert.equal(await engine.get('orders', 'o-2'), undefined);

    await engine.transaction((tx) => {
      for (let i = 0; i < 5; i++) tx.put('orders', `p-${i}`, String(i));
      assert.deepEqual(tx.get('orders', 'p-3'), Buffer.from('3'));  // its own writes
    });
    const page = await engine.scan('orders', { prefix: 'p-', limit: 3 });
    assert.deepEqual(page.rows.map((row) => row.key.toString()), ['p-0', 'p-1', 'p-2']);
    assert.equal(page.more, true);
    assert.equal(engine.partitions, 4);
    assert.ok(engine.partitionOf('alice') < 4);
  } finally {
    await engine.close();
  }
});

test('many transactions in flight from one event loop all commit', async () => {
  const engine = await wharf.open(scratch('inflight'));
  try {
    await engine.declareTypes('Tick');
    const commits = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      engine.transaction((tx) => { tx.emit('Tick', String(i), { key: `k${i % 7}` }); })));
    const ids = new Set(commits.map((commit) => commit.firstId));
    assert.equal(ids.size, 200);
  } finally {
    await engine.close();
  }
});

test('bad input is refused naming the argument', async () => {
  const engine = await wharf.open(scratch('bad'));
  try {
    await engine.declareTypes('T');
    const tx = engine.begin();
    const refuse = (fn, pattern) => assert.throws(fn, (error) => {
      assert.ok(error instanceof wharf.InvalidArgument, `${error}`);
      assert.equal(error.code, 'WHARF_INVALID_ARGUMENT');
      assert.match(error.message, pattern);
      return true;
    });
    refuse(() => tx.put('ord\0ers', 'k', 'v'), /table must not contain a NUL/);
    refuse(() => tx.put('orders', 42, 'v'), /key must be a Buffer/);
    refuse(() => tx.put(undefined, 'k', 'v'), /table must be a string/);
    refuse(() => tx.emit('T\0x', 'p'), /type must not contain a NUL/);
    refuse(() => tx.emit('T', 'p', { v: -1 }), /options.v must be in/);
    refuse(() => tx.emit('T', 'p', { v: 2 ** 32 }), /options.v must be in/);
    refuse(() => tx.emit('T', 'p', { deliverAtMs: 1.5 }), /options.deliverAtMs must be an integer/);
    refuse(() => tx.emit('T', 'p', { headers: { 'a\0b': 'x' } }), /headers name must not/);
    refuse(() => tx.put('x'.repeat(256), 'k', 'v'), /table is longer than 255/);
    // Refused by the C ABI (undeclared type): the same class, its message.
    refuse(() => tx.emit('Undeclared', 'p'), /Undeclared/);
    tx.abort();
    refuse(() => tx.put('orders', 'k', 'v'), /already committed or aborted/);
    assert.throws(() => engine.scan('orders', { limit: 0 }), /options.limit must be in/);
    assert.throws(() => engine.get('t\0', 'k'), wharf.InvalidArgument);
    await assert.rejects(wharf.open('bad\0path'), /path must not contain a NUL/);
    await assert.rejects(wharf.open(scratch('opt'), { partitions: 'many' }), (error) => {
      assert.ok(error instanceof wharf.InvalidArgument);
      assert.match(error.message, /partitions/);
      return true;
    });
    assert.throws(() => wharf.createRuntime({ engine: {} }), /options.engine must be an Engine/);
    const runtime = wharf.createRuntime({ engine });
    assert.throws(() => runtime.subscribe('s', ['T'], 'not a function'), /handler must be a function/);
    assert.throws(() => runtime.subscribe('s\0', ['T'], async () => {}), /id must not contain a NUL/);
    assert.throws(() => runtime.subscribe('s', [], async () => {}), /types must be/);
    assert.throws(() => runtime.subscribe('s', ['T'], async () => {}, { keyConcurrency: 'x;y' }),
      /keyConcurrency must not contain/);
    await assert.rejects(runtime.start({ renewMs: 5000, leaseMs: 1000 }), (error) => {
      assert.ok(error instanceof wharf.InvalidArgument);
      assert.match(error.message, /renew_ms/);
      return true;
    });
  } finally {
    await engine.close();
  }
});

test('errors carry code and subcode: a read conflict, a second open, a closed engine', async () => {
  const dir = scratch('errors');
  const engine = await wharf.open(dir);
  try {
    await assert.rejects(wharf.open(dir), (error) => {
      assert.ok(error instanceof wharf.IOError);
      assert.equal(error.code, 'WHARF_IO_ERROR');
      assert.equal(error.subcode, 'DATABASE_LOCKED');
      return true;
    });
    await engine.transaction((tx) => tx.put('counters', 'c', '0'));
    const first = engine.begin();
    first.get('counters', 'c');
    await engine.transaction((tx) => tx.put('counters', 'c', '1'));
    first.put('counters', 'c', '2');
    await assert.rejects(first.commit(), (error) => {
      assert.ok(error instanceof wharf.ReadConflict);
      assert.ok(error instanceof wharf.Conflict);
      assert.equal(error.code, 'WHARF_CONFLICT');
      assert.equal(error.subcode, 'READ_CONFLICT');
      return true;
    });
    // engine.transaction runs the function again on a read conflict.
    let runs = 0;
    await engine.transaction(async (tx) => {
      runs++;
      const value = Number(tx.get('counters', 'c'));
      if (runs === 1) await engine.transaction((other) => other.put('counters', 'c', '10'));
      tx.put('counters', 'c', String(value + 1));
    });
    assert.equal(runs, 2);
    assert.deepEqual(await engine.get('counters', 'c'), Buffer.from('11'));
  } finally {
    await engine.close();
  }
  assert.throws(() => engine.begin(), (error) => error instanceof wharf.Closed);
});

test('admin API and metrics', async () => {
  const engine = await wharf.open(scratch('admin'), { partitions: 2 });
  try {
    await engine.declareTypes('Paid');
    for (let i = 0; i < 4; i++) {
      await engine.transaction((tx) => { tx.emit('Paid', String(i), { key: `k${i}` }); });
    }
    const runtime = wharf.createRuntime({ engine });
    let calls = 0;
    runtime.subscribe('ledger', ['Paid'], async (fact) => {
      calls++;
      if (fact.payload.toString() === '2') throw new Error('card declined');
    }, { maxAttempts: 1 });
    await runtime.drain();
    await runtime.stop();
    assert.equal(calls, 4);
    const letters = await engine.deadLetters('ledger');
    assert.equal(letters.length, 1);
    assert.match(letters[0].reason, /card declined/);
    assert.equal(letters[0].fact.payload.toString(), '2');
    const cursors = await engine.cursors();
    assert.ok(cursors.some((row) => row.consumer === 'ledger' && row.factId > 0));
    const stat = await engine.stat();
    assert.equal(stat.factCount, 4);
    assert.equal(stat.deadLetterCount, 1);
    assert.ok(stat.consumers.some((row) => row.consumer === 'ledger'));
    const retried = await engine.retryDeadLetters('ledger');
    assert.equal(retried.length, 1);
    await engine.copyCursor('ledger', 'ledger-2');
    await engine.setCursor('ledger-2', 0);
    assert.equal(await engine.cursor('ledger-2', 0), 0);
    await engine.deleteCursor('ledger-2');
    await assert.rejects(engine.deleteCursor('ledger-2'), (error) => error instanceof wharf.NotFound);
    const samples = await engine.metrics();
    const committed = samples.find((sample) => sample.name === 'wharf_facts_committed_total');
    assert.ok(committed && committed.value >= 4, JSON.stringify(samples.slice(0, 3)));
    assert.match(await engine.metricsText(), /wharf_facts_committed_total/);
  } finally {
    await engine.close();
  }
});
