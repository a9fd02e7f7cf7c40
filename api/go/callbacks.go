package wharf

// Functions called by the C library (through the shims of shims.go) on its threads.

/*
#include <stdlib.h>
#include <wharf.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"
)

//export wharfGoFact
func wharfGoFact(ctx unsafe.Pointer, fact *C.wharf_fact) {
	cellValue(ctx).(func(*Fact))(copyFact(fact))
}

//export wharfGoProject
func wharfGoProject(ctx unsafe.Pointer, fact *C.wharf_fact, effects *C.wharf_txn) C.wharf_outcome {
	handler := cellValue(ctx).(ProjectFunc)
	return deliver(fact, func(f *Fact) error { return handler(f, &Txn{c: effects}) })
}

//export wharfGoSubscribe
func wharfGoSubscribe(ctx unsafe.Pointer, fact *C.wharf_fact) C.wharf_outcome {
	handler := cellValue(ctx).(SubscribeFunc)
	return deliver(fact, handler)
}

//export wharfGoDestroy
func wharfGoDestroy(ctx unsafe.Pointer) { freeCell(ctx) }

// deliver runs a handler on a fact and returns its outcome, giving the runtime the reason of a
// failure (trace events, dead letters). The fact handle stays valid while deliver waits.
func deliver(fact *C.wharf_fact, handler func(*Fact) error) C.wharf_outcome {
	outcome, reason := runHandler(func() error { return handler(copyFact(fact)) })
	if reason != "" {
		setReason(fact, reason)
	}
	return C.wharf_outcome(outcome)
}

// runHandler runs handler and settles what it did: Handled only when it returned nil; every other
// way out (an error, a panic, runtime.Goexit) is a failure, with the best reason that can be
// recovered. Reading what the handler left (the error's text, the panic's value) runs the
// application's methods, which may panic in turn: that is caught too, never turned into success.
//
// The handler runs on a goroutine of its own, which the calling goroutine (a worker thread of the
// runtime, inside a cgo callback) waits for: runtime.Goexit then ends that goroutine only (on a
// thread Go did not create, a cgo callback's goroutine that exits aborts the process; on one it
// did, Goexit would unwind through the C library's frames).
func runHandler(handler func() error) (Outcome, string) {
	done := make(chan settlement, 1)
	go handlerGoroutine(handler, done)
	s := <-done
	return s.outcome, s.reason
}

type settlement struct {
	outcome Outcome
	reason  string
}

// handlerGoroutine is the goroutine of one handler call (inHandler looks for it on the stack).
func handlerGoroutine(handler func() error, done chan<- settlement) {
	// Sent as it is unless callHandler returns: runtime.Goexit was called (by the handler or by a
	// method of what it left).
	s := settlement{Failed, "the handler called runtime.Goexit"}
	defer func() { done <- s }()
	s = callHandler(handler)
}

func callHandler(handler func() error) (s settlement) {
	// Stands if settle panics (it protects every call of the application's methods).
	s = settlement{Failed, "reading the handler's error panicked"}
	returned := false
	defer func() {
		p := recover()
		if !returned {
			// p is nil for panic(nil) (before Go 1.21), and during runtime.Goexit, where this
			// settlement is dropped (callHandler never returns: handlerGoroutine's stands).
			s = settlement{Failed, panicReason(p)}
		}
	}()
	err := handler()
	returned = true
	return settle(err)
}

// settle is the outcome and reason of a handler's returned error.
func settle(err error) settlement {
	if err == nil {
		return settlement{Handled, ""}
	}
	s := settlement{outcome: Failed}
	// Only Reject and RetryLater choose another failure; nothing an error carries means Handled.
	// errors.As runs the chain's Unwrap and As methods, which may panic: then it stays Failed.
	var chosen *outcomeError
	if found, ok := protect(func() bool { return errors.As(err, &chosen) }); ok && found &&
		chosen != nil && (chosen.outcome == Rejected || chosen.outcome == Retry) {
		s.outcome = chosen.outcome
	}
	text, ok := protect(err.Error)
	switch {
	case !ok:
		s.reason = fmt.Sprintf("the handler returned a %T whose Error method panicked", err)
	case text == "":
		s.reason = fmt.Sprintf("the handler returned a %T with an empty message", err)
	default:
		s.reason = text
	}
	return s
}

// panicReason describes a recovered panic value without letting its formatting panic.
func panicReason(p any) string {
	if p == nil {
		return "the handler panicked with a nil value"
	}
	if text, ok := protect(func() string { return fmt.Sprint(p) }); ok {
		return "the handler panicked: " + text
	}
	return fmt.Sprintf("the handler panicked with a %T; its value could not be formatted", p)
}

// protect runs f; ok is false when it panicked (the panic's value is dropped unread: formatting
// it could panic again).
func protect[T any](f func() T) (value T, ok bool) {
	defer func() {
		if !ok {
			recover()
		}
	}()
	value = f()
	return value, true
}

// The entry of handlerGoroutine, found on the stack of a goroutine running a handler.
var handlerGoroutineEntry = reflect.ValueOf(handlerGoroutine).Pointer()

// inHandler reports whether the calling goroutine is running a handler (the calls that would wait
// for the handler's own delivery refuse it, as the C ABI refuses them on a worker thread).
func inHandler() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(1, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	for {
		frame, more := frames.Next()
		if frame.Entry == handlerGoroutineEntry {
			return true
		}
		if !more {
			return false
		}
	}
}

// refuseInHandler is the error of a call that must not be made from a handler.
func refuseInHandler(function string) error {
	if !inHandler() {
		return nil
	}
	return &Error{Status: StatusInvalidArgument,
		Message: function + " must not be called from a handler (it would deadlock)"}
}

// setReason hands the runtime a failure's reason; a NUL byte (which would end the C string there)
// is written as \0, so the reason arrives whole.
func setReason(fact *C.wharf_fact, reason string) {
	var args cArgs
	defer args.free()
	creason := args.str("reason", strings.ReplaceAll(reason, "\x00", `\0`))
	C.wharf_handler_reason(fact, creason)
}
