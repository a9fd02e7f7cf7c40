// Shared by the tests: a scratch directory per test and polling with a deadline.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function scratch(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `wharf-node-${name}-`));
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
