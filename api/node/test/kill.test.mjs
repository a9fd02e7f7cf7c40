// Exactly once across a SIGKILL of the Node process: a child commits facts and projects them
// (each fact's effects count its applications); the parent kills it mid-stream (twice), then
// drains what is left and checks that every fact in the outbox was applied exactly once.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import * as wharf from '../index.mjs';
import { scratch } from './helpers.mjs';

const child = fileURLToPath(new URL('./fixtures/kill_child.mjs', import.meta.url));

// Runs the child until it has applied `until` facts, then SIGKILLs it.
function runAndKill(dir, until) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [child, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    proc.stdout.on('data', (chunk) => {
      output += chunk;
      const applied = [...output.matchAll(/applied (\d+)/g)].map((m) => Number(m[1]));
      if (applied.length > 0 && applied[applied.length - 1] >= until) proc.kill('SIGKILL');
    });
    proc.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve();
      else reject(new Error(`child exited with ${code} before the kill: ${output}`));
    });
  });
}

test('a projection applies every fact exactly once across SIGKILLs', async () => {
  const dir = scratch('kill');
  await runAndKill(dir, 200);
  await runAndKill(dir, 200);
  const engine = await wharf.open(dir);
  try {
    const runtime = wharf.createRuntime({ engine });
    runtime.project('ledger', ['Paid'], (fact, effects) => {
      const key = String(fact.id);
      const count = Number(effects.get('applied', key) ?? 0);
      effects.put('applied', key, String(count + 1));
    }, { batchFacts: 20 });
    await runtime.drain();
    await runtime.stop();
    const stat = await engine.stat();
    const rows = [];
    let from = Buffer.alloc(0);
    for (;;) {
      const page = await engine.scan('applied', { from, limit: 10000 });
      rows.push(...page.rows);
      if (!page.more) break;
      from = Buffer.concat([page.rows[page.rows.length - 1].key, Buffer.from([0])]);
    }
    assert.ok(stat.factCount >= 400, `only ${stat.factCount} facts committed`);
    assert.equal(rows.length, stat.factCount);
    const twice = rows.filter((row) => row.value.toString() !== '1');
    assert.deepEqual(twice.map((row) => `${row.key}=${row.value}`), []);
  } finally {
    await engine.close();
  }
});
