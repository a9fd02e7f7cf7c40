// What the README's Node example assumes: the application's sendPush. After it, the test lets the
// runtime deliver, checks that the subscriber pushed the example's one PushRequested fact and the
// projection wrote its row, then stops the runtime and closes the engine.
const pushes = [];
async function sendPush(payload, { idempotencyKey }) {
  pushes.push({ payload: payload.toString(), idempotencyKey });
}
// --- end ---
await runtime.drain();
if (pushes.length !== 1 || JSON.parse(pushes[0].payload).to !== 'alice') {
  throw new Error(`expected one push to alice, got ${JSON.stringify(pushes)}`);
}
if (ids.length !== 2) throw new Error(`expected the commit's two fact ids, got ${ids}`);
const row = await engine.get('by-customer', 'alice');
if (row === null || row === undefined || row.toString() !== 'o-1') {
  throw new Error(`expected the projection's row by-customer/alice = o-1, got ${row}`);
}
await runtime.stop();
await engine.close();
