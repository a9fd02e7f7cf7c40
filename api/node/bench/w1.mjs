// W1-append from Node: one event loop keeps `inFlight` transactions committing (each `batch`
// facts of 100 random bytes under 64 keys, plus one 16-byte-key / 32-byte-value upsert into
// `orders`; durability sync), for `seconds`. The shape of c_abi_bench w1 (bench/README.md's W1),
// whose producers are threads; here the concurrency is promises on one thread.
//   node w1.mjs [--in-flight 64] [--batch 10] [--seconds 3] [--dir DIR]
// Prints one JSON line: {"workload": "W1-append", "api": "node", "facts_per_s": ...}.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as wharf from '../index.mjs';

const { values } = parseArgs({
  options: {
    'in-flight': { type: 'string', default: '64' },
    batch: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '3' },
    dir: { type: 'string', default: process.env.TMPDIR ?? os.tmpdir() },
  },
});
const inFlight = Number(values['in-flight']);
const batch = Number(values.batch);
const seconds = Number(values.seconds);

const dir = fs.mkdtempSync(path.join(values.dir, 'w1-node-'));
const engine = await wharf.open(dir, { durability: 'sync', partitions: 16 });
await engine.declareTypes('OrderCreated');

// Random bytes made once: the engine does not look at them.
const payloads = Array.from({ length: 1024 }, () => crypto.randomBytes(100));
const keys = Array.from({ length: 64 }, (_, i) => `customer-${String(i).padStart(7, '0')}`);
let n = 0;
const latenciesUs = [];
let commits = 0;

async function producer(endMs) {
  while (Date.now() < endMs) {
    const tx = engine.begin();
    for (let i = 0; i < batch; i++) {
      n++;
      tx.emit('OrderCreated', payloads[n & 1023], { key: keys[(n * 7919) & 63] });
    }
    tx.put('orders', `order-${String(n).padStart(10, '0')}`.slice(0, 16), payloads[n & 1023]
      .subarray(0, 32));
    const started = process.hrtime.bigint();
    await tx.commit();
    latenciesUs.push(Number(process.hrtime.bigint() - started) / 1000);
    commits++;
  }
}

const startMs = Date.now();
await Promise.all(Array.from({ length: inFlight }, () => producer(startMs + seconds * 1000)));
const elapsedS = (Date.now() - startMs) / 1000;
await engine.close();
fs.rmSync(dir, { recursive: true, force: true });
latenciesUs.sort((a, b) => a - b);
const percentile = (q) => Math.round(latenciesUs[Math.floor(q * (latenciesUs.length - 1))] ?? 0);
console.log(JSON.stringify({
  workload: 'W1-append', api: 'node', in_flight: inFlight, batch, durability: 'sync',
  seconds: Number(elapsedS.toFixed(3)), facts_per_s: Math.round((commits * batch) / elapsedS),
  commits_per_s: Math.round(commits / elapsedS),
  latency_us: { p50: percentile(0.5), p99: percentile(0.99) },
}));
