// The runtime from Node: handlers run on the event loop; an async subscriber delivers at least
// once, in order per key, several keys at once (keyConcurrency); a rejected promise is a failed
// delivery (retried, never counted as success); start({ workers: false }) delivers nothing; two
// runtimes share consumers through leases; projections' effects commit with the cursor.
import assert from 'node:assert/strict';
import test from 'node:test';
import * as wharf from '../index.mjs';
import { scratch, sleep, waitFor } from './helpers.mjs';

async function engineWith(name, facts, options = { partitions: 4 }) {
  const engine = await wharf.open(scratch(name), options);
  await engine.declareTypes('Event');
  for (let start = 0; start < facts.length; start += 50) {
    await engine.transaction((tx) => {
      for (const [key, payload] of facts.slice(start, start + 50)) {
        tx.emit('Event', payload, { key });
      }
    });
  }
  return engine;
}

test('async subscriber: per-key order, several keys at once, every fact at least once', async () => {
  const facts = [];
  for (let i = 0; i < 400; i++) facts.push([`k${i % 20}`, String(i)]);
  const engine = await engineWith('subscriber', facts);
  try {
    const runtime = wharf.createRuntime({ engine, instance: 'a' });
    const seen = new Map();  // key -> payloads in delivery order
    let inHandler = 0;
    let inHandlerMax = 0;
    runtime.subscribe('push-delivery', ['Event'], async (fact) => {
      inHandler++;
      inHandlerMax = Math.max(inHandlerMax, inHandler);
      await sleep(2);
      inHandler--;
      const key = fact.key.toString();
      if (!seen.has(key)) seen.set(key, []);
      seen.get(key).push(Number(fact.payload));
    }, { keyConcurrency: 8 });
    await runtime.start({ leaseMs: 3000, renewMs: 1000 });
    await waitFor(() => [...seen.values()].reduce((n, list) => n + list.length, 0) >= 400,
      'every fact delivered');
    await runtime.stop();
    for (const [key, payloads] of seen) {
      const sorted = [...new Set(payloads)].sort((a, b) => a - b);
      assert.deepEqual([...new Set(payloads)], sorted, `key ${key} out of order`);
    }
    assert.equal(new Set([...seen.values()].flat()).size, 400);
    assert.ok(inHandlerMax > 1, `keyConcurrency: at most ${inHandlerMax} handler(s) at once`);
  } finally {
    await engine.close();
  }
});

test('a rejected promise or a throw is a failed delivery, retried with its reason', async () => {
  const engine = await engineWith('rejected', [['a', 'first'], ['b', 'second']]);
  try {
    const runtime = wharf.createRuntime({ engine, backoffInitialMs: 1, backoffMaxMs: 5 });
    const attempts = [];
    const traces = [];
    runtime.on('trace', (event) => traces.push(event));
    runtime.subscribe('mailer', ['Event'], async (fact) => {
      attempts.push([fact.payload.toString(), fact.attempt]);
      if (fact.attempt === 1) {
        if (fact.payload.toString() === 'first') throw new Error('smtp down');
        return Promise.reject(new TypeError('bad address'));
      }
    });
    await runtime.start();
    await waitFor(() => attempts.length >= 4, 'the retries');
    await runtime.stop();
    assert.deepEqual(attempts.filter(([, attempt]) => attempt === 2).map(([p]) => p).sort(),
      ['first', 'second']);
    const failed = traces.filter((event) => event.name === 'subscriber-failed');
    assert.ok(failed.some((event) => /Error: smtp down/.test(event.reason)),
      JSON.stringify(traces));
    assert.ok(failed.some((event) => /TypeError: bad address/.test(event.reason)));
    // Passed only after success: the cursor is past both facts.
    const cursors = await engine.cursors();
    assert.equal(cursors.filter((row) => row.consumer === 'mailer')
      .reduce((n, row) => n + (row.factId > 0 ? 1 : 0), 0) > 0, true);
  } finally {
    await engine.close();
  }
});

test('start({ workers: false }) delivers nothing', async () => {
  const engine = await engineWith('api-only', [['a', '1'], ['b', '2']]);
  try {
    const runtime = wharf.createRuntime({ engine });
    let calls = 0;
    runtime.subscribe('push-delivery', ['Event'], async () => { calls++; });
    runtime.project('index', ['Event'], () => { calls++; });
    await runtime.start({ workers: false });
    await sleep(300);
    await runtime.stop();
    assert.equal(calls, 0);
    assert.equal(await engine.cursor('push-delivery', 0), 0);
  } finally {
    await engine.close();
  }
});

test('leases: two runtimes never deliver one consumer at once; stop() hands it over', async () => {
  const engine = await engineWith('leases', [['a', '0']], { partitions: 1 });
  try {
    const delivered = { one: [], two: [] };
    const make = (instance) => {
      const runtime = wharf.createRuntime({ engine, instance });
      runtime.subscribe('push-delivery', ['Event'], async (fact) => {
        delivered[instance].push(Number(fact.payload));
      });
      return runtime;
    };
    const one = make('one');
    await one.start({ leaseMs: 1500, renewMs: 200 });
    await waitFor(() => delivered.one.length === 1, 'delivery by the first runtime');
    const two = make('two');
    await two.start({ leaseMs: 1500, renewMs: 200 });
    for (let i = 1; i <= 5; i++) {
      await engine.transaction((tx) => { tx.emit('Event', String(i), { key: 'a' }); });
    }
    await waitFor(() => delivered.one.length === 6, 'the first runtime delivering the rest');
    await sleep(400);  // two renew periods: the second runtime still takes nothing
    assert.deepEqual(delivered.two, []);
    const leases = await engine.leases();
    assert.equal(leases.find((row) => row.consumer === 'push-delivery').owner, 'one');
    await one.stop();  // releases its leases
    await engine.transaction((tx) => { tx.emit('Event', '6', { key: 'a' }); });
    await waitFor(() => delivered.two.includes(6), 'the second runtime taking over');
    await two.stop();
    assert.ok(!delivered.one.includes(6));
  } finally {
    await engine.close();
  }
});

test('projections and reactions: effects commit with the cursor; trace events', async () => {
  const engine = await engineWith('project', [['a', '5'], ['a', '7'], ['b', '1']]);
  try {
    await engine.declareTypes('Doubled');
    const runtime = wharf.createRuntime({ engine });
    runtime.project('totals', ['Event'], (fact, effects) => {
      const key = fact.key.toString();
      const total = Number(effects.get('totals', key) ?? 0);
      effects.put('totals', key, String(total + Number(fact.payload)));
      assert.throws(() => effects.emit('Doubled', 'x'), /projection cannot emit/);
    });
    runtime.react('doubler', ['Event'], async (fact, effects) => {
      await sleep(1);  // an async handler: its worker waits
      effects.emit('Doubled', String(2 * Number(fact.payload)), { key: fact.key });
    });
    const doubled = [];
    runtime.subscribe('doubled', ['Doubled'], async (fact) => {
      doubled.push([fact.payload.toString(), fact.source, fact.depth]);
    });
    runtime.project('broken', ['Event'], () => { throw new Error('bug'); });
    await runtime.drain();
    await runtime.stop();
    assert.deepEqual(await engine.get('totals', 'a'), Buffer.from('12'));
    assert.deepEqual(await engine.get('totals', 'b'), Buffer.from('1'));
    assert.deepEqual(doubled.map(([p]) => p).sort(), ['10', '14', '2']);
    assert.ok(doubled.every(([, source, depth]) => source === 'doubler' && depth === 1));
    const letters = await engine.deadLetters('broken');
    assert.equal(letters.length, 3);
    assert.match(letters[0].reason, /Error: bug/);
  } finally {
    await engine.close();
  }
});

test('taps see live facts; effects are unusable once their handler returned', async () => {
  const engine = await engineWith('tap', []);
  try {
    const runtime = wharf.createRuntime({ engine });
    const tapped = [];
    let kept = null;
    const facts = {};
    runtime.tap('live', ['Event'], (fact) => {
      tapped.push(fact.payload.toString());
      facts.tap = fact;
    });
    runtime.project('keeper', ['Event'], (fact, effects) => {
      kept = effects;
      facts.project = fact;
    });
    runtime.subscribe('sub', ['Event'], async (fact) => { facts.subscribe = fact; });
    await runtime.start();
    await engine.transaction((tx) => { tx.emit('Event', 'hello', { key: 'a', headers: { h: 'x' } }); });
    await waitFor(() => Object.keys(facts).length === 3, 'the tap, projection and subscriber');
    await runtime.stop();
    assert.deepEqual(tapped, ['hello']);
    for (const [kind, fact] of Object.entries(facts)) {
      assert.deepEqual(fact.headers, { h: Buffer.from('x') }, kind);
      assert.deepEqual(fact.key, Buffer.from('a'), kind);
      assert.deepEqual(fact.payload, Buffer.from('hello'), kind);
      assert.equal(fact.type, 'Event', kind);
      assert.ok(fact.id > 0 && fact.commitMs > 0 && fact.v === 1 && fact.depth === 0, kind);
    }
    assert.throws(() => kept.put('t', 'k', 'v'), (error) => error instanceof wharf.InvalidArgument &&
      /until the handler returns/.test(error.message));
  } finally {
    await engine.close();
  }
});
