package wharf

// C shims between the C ABI's callback types (const-qualified facts) and the functions exported
// from Go in callbacks.go. They live in a file without //export, since cgo allows C definitions
// only there.

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

extern void wharfGoFact(void* ctx, wharf_fact* fact);
extern wharf_outcome wharfGoProject(void* ctx, wharf_fact* fact, wharf_txn* effects);
extern wharf_outcome wharfGoSubscribe(void* ctx, wharf_fact* fact);
extern void wharfGoDestroy(void* ctx);
extern void wharfGoCommitted(void* ctx, wharf_status status, uint64_t last_fact_id);
extern int wharfGoRow(void* ctx, void* key, size_t key_len, void* value, size_t value_len);
extern wharf_status wharfGoUpcast(void* ctx, void* payload, size_t payload_len, wharf_upcast* out);
extern wharf_status wharfGoMigrate(void* ctx, void* row, size_t row_len, wharf_upcast* out);
extern void wharfGoDeadLetter(void* ctx, char* consumer, char* reason, wharf_fact* fact);
extern wharf_outcome wharfGoSubscribeAsync(void* ctx, wharf_fact* fact, uint64_t delivery);
extern void wharfGoTrace(void* ctx, int level, char* name, char* consumer, uint64_t fact_id,
                         char* reason, uint32_t attempt);

// > 0 while a Go handler runs on this thread (inHandler). Never left raised: a handler's panics
// are recovered in Go and its runtime.Goexit ends the process.
static __thread int handler_depth;
int wharfgo_in_handler(void) { return handler_depth > 0; }

static void fact_shim(void* ctx, const wharf_fact* fact) { wharfGoFact(ctx, (wharf_fact*)fact); }
static wharf_outcome project_shim(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  ++handler_depth;
  wharf_outcome outcome = wharfGoProject(ctx, (wharf_fact*)fact, effects);
  --handler_depth;
  return outcome;
}
static wharf_outcome subscribe_shim(void* ctx, const wharf_fact* fact) {
  ++handler_depth;
  wharf_outcome outcome = wharfGoSubscribe(ctx, (wharf_fact*)fact);
  --handler_depth;
  return outcome;
}
static wharf_outcome subscribe_async_shim(void* ctx, const wharf_fact* fact,
                                          wharf_delivery delivery) {
  ++handler_depth;
  wharf_outcome outcome = wharfGoSubscribeAsync(ctx, (wharf_fact*)fact, delivery);
  --handler_depth;
  return outcome;
}
// A trace function marks its thread too: it may run inside a handler's delivery, and the calls
// that would wait for that delivery must be refused before they take the Go locks.
static void trace_shim(void* ctx, wharf_trace_level level, const char* name,
                       const char* consumer, uint64_t fact_id, const char* reason) {
  ++handler_depth;
  wharfGoTrace(ctx, (int)level, (char*)name, (char*)consumer, fact_id, (char*)reason,
               wharf_trace_attempt());
  --handler_depth;
}
static void destroy_shim(void* ctx) { wharfGoDestroy(ctx); }
// Runs on an engine thread: wharfGoCommitted only hands the outcome over (a buffered channel).
static void committed_shim(void* ctx, wharf_status status, uint64_t first_fact_id,
                           uint64_t last_fact_id) {
  (void)first_fact_id;
  wharfGoCommitted(ctx, status, last_fact_id);
}
// Called from txn.go (declared there), hence not static.
wharf_status commit_async_go(wharf_txn* txn, void* ctx) {
  return wharf_txn_commit_async(txn, committed_shim, ctx);
}
// An upcaster marks its thread too: the calls refused in a handler would wait for it as well.
static wharf_status upcast_shim(void* ctx, const void* payload, size_t payload_len,
                                wharf_upcast* out) {
  ++handler_depth;
  wharf_status status = wharfGoUpcast(ctx, (void*)payload, payload_len, out);
  --handler_depth;
  return status;
}
// A migration marks its thread too: it runs on the thread that reads the row, and must not call
// what would wait for that read (Engine.Close, a runtime's Stop).
static wharf_status migrate_shim(void* ctx, const void* row, size_t row_len, wharf_upcast* out) {
  ++handler_depth;
  wharf_status status = wharfGoMigrate(ctx, (void*)row, row_len, out);
  --handler_depth;
  return status;
}
static void dead_letter_shim(void* ctx, const char* consumer, const char* reason,
                             const wharf_fact* fact) {
  wharfGoDeadLetter(ctx, (char*)consumer, (char*)reason, (wharf_fact*)fact);
}
static int row_shim(void* ctx, const void* key, size_t key_len, const void* value,
                    size_t value_len) {
  return wharfGoRow(ctx, (void*)key, key_len, (void*)value, value_len);
}

// Called from scan.go (declared there), hence not static.
wharf_status scan_go(wharf_engine* engine, const char* table, const void* prefix,
                     size_t prefix_len, const void* from, size_t from_len, const void* to,
                     size_t to_len, size_t limit, void* ctx, size_t* rows, uint8_t* more) {
  return wharf_scan(engine, table, prefix, prefix_len, from, from_len, to, to_len, limit,
                    row_shim, ctx, rows, more);
}
wharf_status txn_scan_go(wharf_txn* txn, const char* table, const void* prefix,
                         size_t prefix_len, const void* from, size_t from_len, const void* to,
                         size_t to_len, size_t limit, void* ctx, size_t* rows, uint8_t* more) {
  return wharf_txn_scan(txn, table, prefix, prefix_len, from, from_len, to, to_len, limit,
                        row_shim, ctx, rows, more);
}

// Called from versions.go (declared there), hence not static. The engine owns ctx from the call
// on: destroy_shim frees it at wharf_close, or before a failing registration returns.
wharf_status register_upcaster_go(wharf_engine* engine, const char* type, uint32_t from_v,
                                  void* ctx) {
  return wharf_register_upcaster(engine, type, from_v, upcast_shim, ctx, destroy_shim);
}
// Called from tables.go (declared there), owning ctx as register_upcaster_go does.
wharf_status register_migration_go(wharf_engine* engine, const char* table, uint32_t from_v,
                                   void* ctx) {
  return wharf_register_migration(engine, table, from_v, migrate_shim, ctx, destroy_shim);
}
wharf_status dead_letters_go(wharf_engine* engine, const char* consumer, void* ctx) {
  return wharf_dead_letters(engine, consumer, dead_letter_shim, ctx);
}

static wharf_status read_facts_go(wharf_engine* engine, uint32_t partition, uint64_t from_id,
                                  size_t count_max, void* ctx, size_t* count) {
  return wharf_read_facts(engine, partition, from_id, count_max, fact_shim, ctx, count);
}
static wharf_status project_go(wharf_runtime* rt, const char* name, const char* const* types,
                               size_t n_types, const char* options, void* ctx) {
  return wharf_runtime_project_v2(rt, name, types, n_types, options, project_shim, ctx,
                                  destroy_shim);
}
static wharf_status react_go(wharf_runtime* rt, const char* name, const char* const* types,
                             size_t n_types, const char* options, void* ctx) {
  return wharf_runtime_react_v2(rt, name, types, n_types, options, project_shim, ctx,
                                destroy_shim);
}
static wharf_status subscribe_async_go(wharf_runtime* rt, const char* name,
                                       const char* const* types, size_t n_types,
                                       const char* options, void* ctx) {
  return wharf_runtime_subscribe_async(rt, name, types, n_types, options, subscribe_async_shim,
                                       ctx, destroy_shim);
}
// trace_ctx NULL: no trace function (the stderr default). The runtime borrows trace_ctx until
// wharf_runtime_free returns (Runtime.Close frees it then). Called from runtime.go (declared
// there), hence not static.
wharf_status runtime_new_go(wharf_engine* engine, const char* options, void* trace_ctx,
                                   wharf_runtime** out) {
  return wharf_runtime_new_v2(engine, options, trace_ctx != NULL ? trace_shim : NULL, trace_ctx,
                              out);
}
static wharf_status subscribe_go(wharf_runtime* rt, const char* name, const char* const* types,
                                 size_t n_types, const char* options, void* ctx) {
  return wharf_runtime_subscribe_v2(rt, name, types, n_types, options, subscribe_shim, ctx,
                                    destroy_shim);
}
*/
import "C"

import (
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// A Go value handed to C as a callback's ctx: a C-allocated cell holding a cgo.Handle (a Go
// pointer may not be kept by C, and an integer is not a pointer).
func newCell(v any) unsafe.Pointer {
	cell := C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	*(*C.uintptr_t)(cell) = C.uintptr_t(cgo.NewHandle(v))
	liveCells.Add(1)
	return cell
}

// liveCells counts the cells not freed yet (the tests check that C releases what it owns).
var liveCells atomic.Int64

func cellValue(cell unsafe.Pointer) any {
	return cgo.Handle(*(*C.uintptr_t)(cell)).Value()
}

func freeCell(cell unsafe.Pointer) {
	cgo.Handle(*(*C.uintptr_t)(cell)).Delete()
	C.free(cell)
	liveCells.Add(-1)
}

// ReadFacts reads up to max durable facts of partition with id >= fromID, in id order.
func (e *Engine) ReadFacts(partition uint32, fromID uint64, max int) ([]*Fact, error) {
	var facts []*Fact
	cell := newCell(func(f *Fact) { facts = append(facts, f) })
	defer freeCell(cell)
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.read_facts_go(c, C.uint32_t(partition), C.uint64_t(fromID), C.size_t(max), cell, nil)
	})
	return facts, err
}

type registration int

const (
	registerProject registration = iota
	registerReact
	registerSubscribe
	registerSubscribeAsync
)

func (r *Runtime) register(kind registration, name string, types []string, options string,
	handler any) error {
	var args cArgs
	defer args.free()
	cname := args.str("name", name)
	ctypes := args.list("types", types)
	coptions := args.optional("options", options)
	if args.err != nil {
		return args.err
	}
	// Owned by the runtime from here: it calls destroy_shim (freeing the cell) when it no longer
	// needs it, also when the registration fails.
	cell := newCell(handler)
	function := [...]string{"Runtime.Project", "Runtime.React", "Runtime.Subscribe",
		"Runtime.SubscribeAsync"}[kind]
	return r.with(function, func(rt *C.wharf_runtime) C.wharf_status {
		switch kind {
		case registerProject:
			return C.project_go(rt, cname, ctypes, C.size_t(len(types)), coptions, cell)
		case registerReact:
			return C.react_go(rt, cname, ctypes, C.size_t(len(types)), coptions, cell)
		case registerSubscribeAsync:
			return C.subscribe_async_go(rt, cname, ctypes, C.size_t(len(types)), coptions, cell)
		default:
			return C.subscribe_go(rt, cname, ctypes, C.size_t(len(types)), coptions, cell)
		}
	}, func() { freeCell(cell) })
}
