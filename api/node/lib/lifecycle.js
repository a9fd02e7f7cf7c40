'use strict';
// Process lifetime: what is open, what happens at exit and on SIGINT/SIGTERM.
//
// At exit ('exit' event: process.exit() or the loop running out) no promise can settle any more,
// so the runtimes still live are shut down synchronously (parked handler calls and pending
// deliveries are answered "retry": those facts keep their place) and the engines closed, before
// Node's teardown; the exit status stays the program's.
//
// SIGINT/SIGTERM while a runtime with workers is started: the started runtimes are stopped
// (finishing what is in flight, releasing their leases) and the engines closed. When the program
// listens for the signal itself, it decides what happens next; otherwise the signal is raised
// again with Node's default action, so the process ends as a user expects (status 130 for Ctrl-C).

const engines = new Set();   // open Engines
const runtimes = new Set();  // Runtimes with a native runtime (created, not shut down)
const started = new Set();   // Runtimes started with workers and signal handling

function shutdownAll() {
  for (const runtime of [...runtimes]) runtime._shutdownSync();
  for (const engine of [...engines]) engine._closeSync();
}
process.on('exit', shutdownAll);

async function stopRuntimesOf(engine) {
  await Promise.allSettled([...runtimes].filter((runtime) => runtime.engine === engine)
    .map((runtime) => runtime.stop()));
}

const SIGNALS = ['SIGINT', 'SIGTERM'];
let stopping = false;

function onSignal(signal) {
  if (stopping) return;
  stopping = true;
  const theirs = process.listenerCount(signal) > 1;
  Promise.allSettled([...started].map((runtime) => runtime.stop()))
    .then(() => Promise.allSettled([...engines].map((engine) => engine.close())))
    .finally(() => {
      stopping = false;
      if (theirs) return;
      for (const name of SIGNALS) process.removeListener(name, onSignal);
      process.kill(process.pid, signal);
    });
}

function addStarted(runtime) {
  if (started.size === 0) for (const name of SIGNALS) process.on(name, onSignal);
  started.add(runtime);
}

function removeStarted(runtime) {
  if (!started.delete(runtime) || started.size > 0) return;
  for (const name of SIGNALS) process.removeListener(name, onSignal);
}

module.exports = { engines, runtimes, stopRuntimesOf, addStarted, removeStarted };
