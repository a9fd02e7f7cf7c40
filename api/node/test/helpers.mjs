// Shared by the tests: a scratch directory per test and polling with a deadline.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const scratchDirs = [];
// Removed when the test process exits (after the package's own exit handler closed its engines).
process.on('exit', () => {
  for (const dir of scratchDirs) fs.rmSync(dir, { recursive: true, force: true });
});

export function scratch(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-node-${name}-`));
  scratchDirs.push(dir);
  return dir;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Resolves once predicate() is true; rejects naming `what` after timeoutMs.
export async function waitFor(predicate, what, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
