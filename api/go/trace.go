package wharf

// Trace events of a runtime (wharf_runtime_new_v2's trace callback).

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// TraceLevel is a trace event's severity (wharf_trace_level).
type TraceLevel int

// The trace levels; never renumbered.
const (
	TraceInfo    TraceLevel = C.WHARF_TRACE_INFO
	TraceWarning TraceLevel = C.WHARF_TRACE_WARNING
	TraceError   TraceLevel = C.WHARF_TRACE_ERROR
)

func (l TraceLevel) String() string {
	switch l {
	case TraceInfo:
		return "info"
	case TraceWarning:
		return "warning"
	case TraceError:
		return "error"
	}
	return "unknown"
}

// TraceEvent is something a runtime reports: a handler that failed, a consumer that starts at
// zero, a deferred free...
type TraceEvent struct {
	Level    TraceLevel
	Name     string // "handler-failed", "subscriber-failed", "consumer-starts-at-zero", ...
	Consumer string // the consumer's id, or ""
	FactID   uint64 // the fact it is about, or 0
	Reason   string
	// Which delivery of FactID the event is about (1: the first; a subscriber's attempts at a
	// fact count across restarts); 0 for an event that is not about a delivery.
	Attempt uint32
}

// TraceFunc receives a runtime's trace events (WithTrace). It runs on the runtime's threads,
// possibly several at once and inside a handler's delivery: it must be safe for concurrent use
// and quick, and must not call the runtime's or the engine's blocking methods (they are refused
// there, as in a handler). A panic in it is recovered and the event dropped (runtime.Goexit ends
// the process, as in a handler: see SubscribeFunc).
type TraceFunc func(TraceEvent)

// WithTrace sends the runtime's trace events (every level) to fn instead of stderr.
func WithTrace(fn TraceFunc) RuntimeOption {
	return func(c *runtimeConfig) { c.trace = fn }
}

// traceCallback names a trace function in the message of exitOnGoexit.
var traceCallback = callbackKind{"trace function", "wharf: a trace function called " +
	"runtime.Goexit (t.Fatal, t.FailNow, t.SkipNow?), which cannot cross the C library; exiting"}

// The trace functions of the runtimes not closed yet, by id. The C library holds a C cell with
// the id, not the function: wharf_runtime_free may be deferred (when it is called from inside a
// callback) and its runtime may then still trace after Close returned, so the cell must outlive
// Close. It is never freed (8 bytes per runtime with a trace function); Close only deletes the
// entry, and events for an id not found are dropped.
var (
	traceFuncs  sync.Map // uint64 -> TraceFunc
	traceLastID atomic.Uint64
)

// registerTrace keeps fn under a new id and returns the id and a C cell holding it.
func registerTrace(fn TraceFunc) (uint64, unsafe.Pointer) {
	id := traceLastID.Add(1)
	traceFuncs.Store(id, fn)
	cell := C.malloc(C.size_t(unsafe.Sizeof(C.uint64_t(0))))
	*(*C.uint64_t)(cell) = C.uint64_t(id)
	return id, cell
}

func unregisterTrace(id uint64) {
	if id != 0 {
		traceFuncs.Delete(id)
	}
}

//export wharfGoTrace
func wharfGoTrace(ctx unsafe.Pointer, level C.int, name, consumer *C.char, factID C.uint64_t,
	reason *C.char, attempt C.uint32_t) {
	found, ok := traceFuncs.Load(uint64(*(*C.uint64_t)(ctx)))
	if !ok {
		return // its runtime was closed
	}
	fn := found.(TraceFunc)
	event := TraceEvent{Level: TraceLevel(level), Name: C.GoString(name),
		Consumer: C.GoString(consumer), FactID: uint64(factID), Reason: C.GoString(reason),
		Attempt: uint32(attempt)}
	// A panic is recovered and dropped: there is nobody to report it to.
	runCallback(traceCallback, func() error {
		fn(event)
		return nil
	})
}
