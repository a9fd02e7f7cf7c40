// runtime.h: the addon's runtime: a wharf_runtime whose handlers run on the JavaScript thread.
//
// How a handler call crosses threads. wharf calls handlers on its worker threads; JavaScript runs
// on one thread only. Every call is queued to the JavaScript thread through one thread-safe
// function per runtime (`events`), which calls the package's dispatcher:
//
//   projection / reaction  The effects transaction is usable only on the worker's thread, until
//     the handler returns, and the runtime commits it with the cursor once the handler returned:
//     so the worker WAITS (ProjectCall) until the JavaScript handler settled. While it waits, each
//     effects call made by the handler (put, delete, emit, get) is handed to the waiting worker,
//     which runs it on its own thread and answers; the JavaScript thread waits for that answer
//     (microseconds: an in-memory write, or a read of the batch's state). This is safe because the
//     JavaScript thread never waits for anything but a worker that is itself parked on the call,
//     and nothing the worker waits for needs the JavaScript thread to be free except the handler
//     itself. What it costs: one worker thread per partition lane in flight is parked for as long
//     as the JavaScript handler runs (an async projection that awaits I/O holds its lane), and two
//     thread switches per handler call plus two per effects call.
//   subscriber  asynchronous (wharf_runtime_subscribe_async): the worker copies the fact into the
//     runtime's inbox and returns WHARF_PENDING at once; the JavaScript thread takes the inbox in
//     batches (one thread-safe call and one Buffer per batch). Settled promises are handed back
//     once per event-loop turn, and a thread of the runtime's own (Completer) calls
//     wharf_delivery_done for them, so the loop never pays for waking the lanes. No thread waits.
//   tap, trace  the fact or event is copied and queued; nothing waits.
//
// Shutdown. A worker parked on a projection call, and a delivery pending in JavaScript, would make
// wharf_runtime_stop wait for a JavaScript thread that is busy stopping: Shutdown() first marks the
// runtime closing, answers every parked call with WHARF_RETRY (the fact keeps its place and is
// delivered again when the consumer runs next), completes every pending delivery with
// WHARF_RETRY, and only then frees the runtime.
#ifndef WHARF_NODE_RUNTIME_H_
#define WHARF_NODE_RUNTIME_H_

#include "napi_util.h"

namespace wharf_node {

void RegisterRuntime(napi_env env, napi_value exports);

}  // namespace wharf_node

#endif  // WHARF_NODE_RUNTIME_H_
