// Package wharf is the Go binding of Wharf, an embedded transactional-outbox engine: commit state
// changes together with facts, and deliver the facts to projections (exactly once) and
// subscribers (at least once), in order within each partition. It wraps the C ABI (wharf.h)
// through cgo and needs only the standard library and an installed libwharf (pkg-config wharf).
// Import it as
//
//	import wharf "github.com/wharf/wharf/api/go"
//
// A transaction commits state and facts together:
//
//	engine, err := wharf.Open("/var/lib/app/wharf", "")
//	defer engine.Close()
//	engine.DeclareTypes("OrderPlaced")
//	txn, _ := engine.Begin()
//	txn.Put("orders", []byte("o-1"), []byte(`{"cents":1250}`))
//	txn.Emit("OrderPlaced", []byte("alice"), []byte("o-1:1250"))
//	_, err = txn.Commit() // nil: durable on disk
//
// A Runtime delivers the facts to handlers (Project, React, Subscribe, SubscribeAsync) or to a
// broker (Relay). The blocking calls have Context twins (Txn.CommitContext,
// Engine.TransactContext, Runtime.DrainContext, Engine.BackupContext, RestoreContext,
// Engine.MigrateTableContext). The admin calls (cursors, dead letters, leases, Trim, Stat) and the
// metrics are Engine methods. Engine, Runtime and Standby are io.Closers.
//
// Thread safety: an Engine and a Runtime may be used from any goroutine; a Txn by one goroutine
// at a time; a Delivery from any goroutine. Errors are *Error values carrying the C ABI's status,
// subcode and message.
package wharf

/*
#cgo pkg-config: wharf
#include <stdlib.h>
#include <wharf.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// call runs a C ABI call and its error check on one OS thread: the message of a failed call is
// kept per thread (wharf_last_error).
func call(f func() C.wharf_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return check(f())
}

// cArgs holds the C copies of one call's string arguments. Every Go string that goes to the C ABI
// as a NUL-terminated parameter goes through it: a string holding a NUL byte is refused (C would
// read it only up to the NUL and act on a shorter name, path or option string), so an argument is
// taken whole or not at all. The first refusal is kept in err; free releases every copy.
type cArgs struct {
	copies []unsafe.Pointer
	err    error
}

// str is a C copy of s, the argument named what (nil once an argument was refused).
func (a *cArgs) str(what, s string) *C.char {
	if a.err != nil {
		return nil
	}
	if at := strings.IndexByte(s, 0); at >= 0 {
		a.err = &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"%s %q contains a NUL byte (at byte %d); the C ABI takes it as a NUL-terminated "+
				"string, so it cannot hold one", what, s, at)}
		return nil
	}
	p := C.CString(s)
	a.copies = append(a.copies, unsafe.Pointer(p))
	return p
}

// optional is str, or NULL for "" (an option string left out).
func (a *cArgs) optional(what, s string) *C.char {
	if s == "" {
		return nil
	}
	return a.str(what, s)
}

// list is a C array of C copies of names, the argument named what (NULL when empty).
func (a *cArgs) list(what string, names []string) **C.char {
	if len(names) == 0 || a.err != nil {
		return nil
	}
	array := (*[1 << 20]*C.char)(C.malloc(C.size_t(len(names)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	a.copies = append(a.copies, unsafe.Pointer(&array[0]))
	for i, name := range names {
		array[i] = a.str(fmt.Sprintf("%s[%d]", what, i), name)
	}
	return &array[0]
}

func (a *cArgs) free() {
	for _, p := range a.copies {
		C.free(p)
	}
	a.copies = nil
}

// bytesPtr points at b's bytes for the duration of a call (nil for an empty slice).
func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Version is the C library's version, e.g. "0.1.0".
func Version() string { return C.GoString(C.wharf_version()) }

// Engine is an open database. Close it once; after Close every call returns ErrClosed.
type Engine struct {
	mu sync.RWMutex // Close waits for calls in progress; calls after it see c == nil
	c  *C.wharf_engine
}

// Open opens (or creates) the database in directory path. options is "" or "key=value;..."
// with the engine options (partitions, durability, io, queue_capacity, when_full, ...).
func Open(path string, options string) (*Engine, error) {
	var args cArgs
	defer args.free()
	cpath := args.str("path", path)
	coptions := args.optional("options", options)
	if args.err != nil {
		return nil, args.err
	}
	var engine *C.wharf_engine
	if err := call(func() C.wharf_status { return C.wharf_open(cpath, coptions, &engine) }); err != nil {
		return nil, err
	}
	return &Engine{c: engine}, nil
}

// Close stops the runtimes still attached (finishing their batches), waits for queued commits and
// closes the database. Idempotent. From a handler it is refused (ErrInvalidArgument: it would wait
// for that handler).
func (e *Engine) Close() error {
	if err := refuseInHandler("Engine.Close"); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return nil
	}
	err := call(func() C.wharf_status { return C.wharf_close(e.c) })
	e.c = nil
	return err
}

// with runs f with the engine's handle, or returns ErrClosed.
func (e *Engine) with(f func(*C.wharf_engine) C.wharf_status) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.c == nil {
		return &Error{Status: StatusClosed, Message: "the engine is closed"}
	}
	return call(func() C.wharf_status { return f(e.c) })
}

// DeclareTypes declares the fact types producers may emit (persisted; again is a no-op).
func (e *Engine) DeclareTypes(types ...string) error {
	var args cArgs
	defer args.free()
	ctypes := args.list("types", types)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_declare_types(c, ctypes, C.size_t(len(types)))
	})
}

// Get reads durable state; errors.Is(err, ErrNotFound) when the key is absent.
func (e *Engine) Get(table string, key []byte) ([]byte, error) {
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return nil, args.err
	}
	var value unsafe.Pointer
	var length C.size_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_get(c, ctable, bytesPtr(key), C.size_t(len(key)), &value, &length)
	})
	runtime.KeepAlive(key)
	if err != nil {
		return nil, err
	}
	defer C.wharf_free(value)
	return C.GoBytes(value, C.int(length)), nil
}

// DurableLSN is the highest fact id that is durable (consumers see facts up to it).
func (e *Engine) DurableLSN() (uint64, error) {
	var id C.uint64_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status { return C.wharf_durable_lsn(c, &id) })
	return uint64(id), err
}

// Partitions is the outbox's partition count.
func (e *Engine) Partitions() (uint32, error) {
	var n C.uint32_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status { return C.wharf_partitions(c, &n) })
	return uint32(n), err
}

// PartitionOf is the partition a fact with this key lands in.
func (e *Engine) PartitionOf(key []byte) (uint32, error) {
	var p C.uint32_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_partition_of(c, bytesPtr(key), C.size_t(len(key)), &p)
	})
	runtime.KeepAlive(key)
	return uint32(p), err
}
