// W8-slow-subscriber from Node: `facts` facts over `keys` keys are committed first (transactions
// of 100 facts, 16 in flight), then an async subscriber whose handler awaits `wait-ms` (a timer:
// the stand-in for a network call) delivers them with keyConcurrency `key-concurrency` over
// `partitions` partitions; the figure is facts delivered per second from start() to the last
// one. The shape of c_abi_bench w8 (bench/README.md's W8). Exits 1 if a key's facts were handed
// over out of order.
//   node w8.mjs [--facts 200000] [--keys 10000] [--partitions 16] [--key-concurrency 64]
//               [--wait-ms 5] [--dir DIR]
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as wharf from '../index.mjs';

const { values } = parseArgs({
  options: {
    facts: { type: 'string', default: '200000' },
    keys: { type: 'string', default: '10000' },
    partitions: { type: 'string', default: '16' },
    'key-concurrency': { type: 'string', default: '64' },
    'wait-ms': { type: 'string', default: '5' },
    dir: { type: 'string', default: process.env.TMPDIR ?? os.tmpdir() },
  },
});
const facts = Number(values.facts);
const keyCount = Number(values.keys);
const partitions = Number(values.partitions);
const keyConcurrency = Number(values['key-concurrency']);
const waitMs = Number(values['wait-ms']);

const dir = fs.mkdtempSync(path.join(values.dir, 'w8-node-'));
const engine = await wharf.open(dir, { durability: 'sync', partitions });
await engine.declareTypes('OrderCreated');
const payloads = Array.from({ length: 1024 }, () => crypto.randomBytes(100));
const keys = Array.from({ length: keyCount }, (_, i) => `customer-${String(i).padStart(7, '0')}`);

let committed = 0;
let n = 0;
async function loader(transactions) {
  for (let t = 0; t < transactions; t++) {
    await engine.transaction((tx) => {
      for (let i = 0; i < 100 && committed < facts; i++, committed++) {
        n++;
        tx.emit('OrderCreated', payloads[n & 1023], { key: keys[(n * 7919) % keyCount] });
      }
    });
  }
}
const transactions = Math.ceil(facts / 100);
await Promise.all(Array.from({ length: 16 }, (_, i) =>
  loader(Math.floor(transactions / 16) + (i < transactions % 16 ? 1 : 0))));

const lastStarted = new Map();
let done = 0;
let violations = 0;
let inFlight = 0;
let mostInFlight = 0;
let finish;
const finished = new Promise((resolve) => { finish = resolve; });
const runtime = wharf.createRuntime({ engine });
runtime.subscribe('w8', ['OrderCreated'], async (fact) => {
  const key = fact.key.toString('latin1');
  if (fact.id < (lastStarted.get(key) ?? 0)) violations++;
  lastStarted.set(key, fact.id);
  mostInFlight = Math.max(mostInFlight, ++inFlight);
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  inFlight--;
  if (fact.attempt === 1 && ++done === committed) finish();
}, { keyConcurrency });
const startMs = performance.now();
await runtime.start({ handleSignals: false });
await finished;
const elapsedS = (performance.now() - startMs) / 1000;
await runtime.stop();
await engine.close();
fs.rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({
  workload: 'W8-slow-subscriber', api: 'node', facts: committed, keys: keyCount, partitions,
  key_concurrency: keyConcurrency, wait_ms: waitMs, seconds: Number(elapsedS.toFixed(3)),
  facts_per_s: Math.round(done / elapsedS), most_in_flight: mostInFlight,
  order_violations: violations,
}));
process.exitCode = violations === 0 ? 0 : 1;
