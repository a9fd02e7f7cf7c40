package wharf

// Payload versions (declared type versions and upcasters), emits with options, and dead letters.

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status register_upcaster_go(wharf_engine* engine, const char* type, uint32_t from_v,
                                  void* ctx);
wharf_status dead_letters_go(wharf_engine* engine, const char* consumer, void* ctx);
*/
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// DeclareType declares the fact type name at payload version version (>= 1), or raises its
// declared version to it (persisted). Producers may emit any version from the one the type was
// first declared at up to version (EmitOptions.Version); consumers receive every fact of it at
// version, lifted by the upcasters registered for the versions between (RegisterUpcaster).
// Declaring the version it has is a no-op. ErrInvalidArgument: a bad name, version 0, or a
// version below the declared one (it never goes back). DeclareTypes declares at version 1.
func (e *Engine) DeclareType(name string, version uint32) error {
	var args cArgs
	defer args.free()
	cname := args.str("type", name)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_declare_type(c, cname, C.uint32_t(version))
	})
}

// DeclaredVersion is the declared payload version of the fact type name, 0 when it is not
// declared.
func (e *Engine) DeclaredVersion(name string) (uint32, error) {
	var args cArgs
	defer args.free()
	cname := args.str("type", name)
	if args.err != nil {
		return 0, args.err
	}
	var version C.uint32_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_declared_version(c, cname, &version)
	})
	return uint32(version), err
}

// UpcastFunc lifts a payload of its type from one version to the next and returns the new
// payload, or an error refusing it. It must be a pure function of the payload, safe for
// concurrent use: it runs on the runtime's worker threads, several at once. It may keep payload.
type UpcastFunc func(payload []byte) ([]byte, error)

// RegisterUpcaster registers fn as the step that lifts payloads of fact type typ from version
// fromV to fromV + 1. It is not persisted: register on every Open, before starting the runtimes
// whose consumers take the type; Runtime.Start refuses a consumer of a type whose chain, from its
// first declared version to its declared one, misses a step (naming it). A consumer receives a
// fact whose upcaster returns an error (or panics) as a dead letter "upcast-failed: upcasting
// 'TYPE' from version N to N+1: ..." holding the error's text and the stored payload, and goes on
// with its next fact (an upcaster calling runtime.Goexit ends the process, as a handler does: see
// SubscribeFunc). The engine keeps fn until it is closed. ErrInvalidArgument: an undeclared type,
// fromV 0 or not below the declared version, a nil fn, or a step already registered.
func (e *Engine) RegisterUpcaster(typ string, fromV uint32, fn UpcastFunc) error {
	if fn == nil {
		return &Error{Status: StatusInvalidArgument, Message: "the upcaster is nil"}
	}
	var args cArgs
	defer args.free()
	ctype := args.str("type", typ)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		// Owned by the engine from here: destroy_shim frees the cell when it lets go of the
		// upcaster (at Close), or before a failing registration returns.
		return C.register_upcaster_go(c, ctype, C.uint32_t(fromV), newCell(fn))
	})
}

// upcasterCallback names an upcaster in the reasons of its failures.
var upcasterCallback = callbackKind{"upcaster", "wharf: an upcaster called runtime.Goexit " +
	"(t.Fatal, t.FailNow, t.SkipNow?), which cannot cross the C library; the fact is not " +
	"delivered and will be delivered again; exiting"}

// upcastRefused is what an upcaster that refuses a payload returns: any status but WHARF_OK fails
// the fact (the reason given to wharf_upcast_fail names why).
const upcastRefused = C.WHARF_INVALID_ARGUMENT

//export wharfGoUpcast
func wharfGoUpcast(ctx unsafe.Pointer, payload unsafe.Pointer, n C.size_t,
	out *C.wharf_upcast) C.wharf_status {
	fn := cellValue(ctx).(UpcastFunc)
	in := goBytes(payload, n)
	var lifted []byte
	// Only a nil error is success; an error, a panic or an error whose text cannot be read refuse
	// the payload, with the best reason that can be recovered.
	outcome, reason := runCallback(upcasterCallback, func() error {
		var err error
		lifted, err = fn(in)
		return err
	})
	if outcome == Handled {
		status := C.wharf_upcast_result(out, bytesPtr(lifted), C.size_t(len(lifted)))
		runtime.KeepAlive(lifted)
		if status == C.WHARF_OK {
			return C.WHARF_OK
		}
		reason = "the upcast payload was refused: " + C.GoString(C.wharf_last_error())
	}
	var args cArgs
	defer args.free()
	// A NUL byte would end the C string there: written as \0, the reason arrives whole.
	C.wharf_upcast_fail(out, args.str("reason", strings.ReplaceAll(reason, "\x00", `\0`)))
	return upcastRefused
}

// Header is one header of a fact: a name (1..255 bytes, no NUL byte) and a value.
type Header struct {
	Name  string
	Value []byte
}

// EmitOptions are the options of Txn.EmitWith; the zero value emits as Txn.Emit does.
type EmitOptions struct {
	Headers []Header // in order, at most 64; a name may repeat
	// 0 to deliver at once; > 0: the fact is held as a timer and released into the outbox when the
	// wall clock reaches it (ms since the Unix epoch); it is delivered under a new id then, and
	// carries the id Commit returned for it as Fact.ScheduledID.
	DeliverAtMs int64
	// The payload's version: 0 for the type's declared version (what Emit emits), or an older one
	// down to the version the type was first declared at (Engine.DeclareType).
	Version uint32
}

// EmitWith is Emit with headers, a delivery time and a payload version (EmitOptions).
// ErrInvalidArgument: as Emit, and a version outside the type's declared range, a negative
// DeliverAtMs, more than 64 headers or a bad header name.
func (t *Txn) EmitWith(factType string, key, payload []byte, opts EmitOptions) error {
	if err := t.live(); err != nil {
		return err
	}
	var args cArgs
	defer args.free()
	ctype := args.str("fact type", factType)
	count := len(opts.Headers)
	names := make([]string, count)
	for i, header := range opts.Headers {
		names[i] = header.Name
	}
	cnames := args.list("header name", names)
	var cvalues *unsafe.Pointer
	var clens *C.size_t
	if count > 0 && args.err == nil {
		// C memory only: Go memory handed to C may not hold Go pointers.
		values := unsafe.Slice((*unsafe.Pointer)(args.alloc(count, unsafe.Sizeof(unsafe.Pointer(nil)))), count)
		lens := unsafe.Slice((*C.size_t)(args.alloc(count, unsafe.Sizeof(C.size_t(0)))), count)
		for i, header := range opts.Headers {
			values[i] = args.bytes(header.Value)
			lens[i] = C.size_t(len(header.Value))
		}
		cvalues, clens = &values[0], &lens[0]
	}
	if args.err != nil {
		return args.err
	}
	err := call(func() C.wharf_status {
		return C.wharf_txn_emit_v2(t.c, ctype, bytesPtr(key), C.size_t(len(key)), bytesPtr(payload),
			C.size_t(len(payload)), cnames, cvalues, clens, C.size_t(count),
			C.int64_t(opts.DeliverAtMs), C.uint32_t(opts.Version))
	})
	runtime.KeepAlive(key)
	runtime.KeepAlive(payload)
	return err
}

// alloc is C memory for n elements of size bytes, released by free.
func (a *cArgs) alloc(n int, size uintptr) unsafe.Pointer {
	p := C.malloc(C.size_t(n) * C.size_t(size))
	a.copies = append(a.copies, p)
	return p
}

// bytes is a C copy of b, released by free (never NULL, also for an empty b).
func (a *cArgs) bytes(b []byte) unsafe.Pointer {
	p := C.CBytes(b)
	a.copies = append(a.copies, p)
	return p
}

// DeadLetter is a fact a consumer gave up on (Fact.Attempt: the delivery that settled it, 0 when
// not recorded).
type DeadLetter struct {
	Consumer string
	Reason   string // "NAME: TEXT", e.g. "handler-failed: ..." or "upcast-failed: ..."
	Fact     *Fact  // as stored (its payload not upcast)
}

// DeadLetters lists the dead letters of consumer ("": of every consumer), ordered by consumer
// then fact id.
func (e *Engine) DeadLetters(consumer string) ([]DeadLetter, error) {
	var args cArgs
	defer args.free()
	cconsumer := args.optional("consumer", consumer)
	if args.err != nil {
		return nil, args.err
	}
	var letters []DeadLetter
	cell := newCell(func(letter DeadLetter) { letters = append(letters, letter) })
	defer freeCell(cell)
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.dead_letters_go(c, cconsumer, cell)
	})
	return letters, err
}

//export wharfGoDeadLetter
func wharfGoDeadLetter(ctx unsafe.Pointer, consumer *C.char, reason *C.char, fact *C.wharf_fact) {
	cellValue(ctx).(func(DeadLetter))(DeadLetter{
		Consumer: C.GoString(consumer), Reason: C.GoString(reason), Fact: copyFact(fact)})
}
