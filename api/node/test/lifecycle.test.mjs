// Process lifetime: exiting with a started runtime (handlers parked, deliveries pending) exits 0
// at once; SIGINT stops the runtime (its leases released: another instance need not wait for
// leaseMs) and ends the process as Ctrl-C does; a program that stops its runtime ends by itself.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import * as wharf from '../index.mjs';
import { scratch } from './helpers.mjs';

const child = fileURLToPath(new URL('./fixtures/exit_child.mjs', import.meta.url));

function run(dir, mode, onOutput) {
  return new Promise((resolve) => {
    const started = Date.now();
    const proc = spawn(process.execPath, [child, dir, mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (chunk) => { stderr += chunk; });
    proc.stdout.on('data', (chunk) => onOutput?.(proc, String(chunk)));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20000);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr, ms: Date.now() - started });
    });
  });
}

async function assertLeasesReleased(dir) {
  const engine = await wharf.open(dir);
  try {
    const leases = await engine.leases();
    assert.ok(leases.length > 0);
    for (const lease of leases) assert.equal(lease.owner, '', JSON.stringify(lease));
  } finally {
    await engine.close();
  }
}

test('process.exit(0) with a started runtime exits 0, its runtime stopped', async () => {
  const dir = scratch('exit');
  const result = await run(dir, 'exit');
  assert.equal(result.signal, null, result.stderr);
  assert.equal(result.code, 0, result.stderr);
  await assertLeasesReleased(dir);  // stopped at exit: another instance need not wait leaseMs
});

test('SIGINT stops the runtime, releases its leases and ends the process', async () => {
  const dir = scratch('sigint');
  const result = await run(dir, 'signal', (proc, text) => {
    if (text.includes('started')) setTimeout(() => proc.kill('SIGINT'), 200);
  });
  assert.ok(result.signal === 'SIGINT' || result.code === 130,
    `exit ${result.code} ${result.signal}: ${result.stderr}`);
  await assertLeasesReleased(dir);
});

test('a program that stops its runtime and closes its engine ends by itself', async () => {
  const result = await run(scratch('natural'), 'natural');
  assert.equal(result.code, 0, result.stderr);
});
