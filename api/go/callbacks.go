package wharf

// Functions called by the C library (through the shims of shims.go) on its threads.

/*
#include <stdlib.h>
#include <wharf.h>

int wharfgo_in_handler(void);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
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
// failure (trace events, dead letters). The fact handle is valid for the duration of deliver.
func deliver(fact *C.wharf_fact, handler func(*Fact) error) C.wharf_outcome {
	outcome, reason := runHandler(func() error { return handler(copyFact(fact)) })
	if reason != "" {
		setReason(fact, reason)
	}
	return C.wharf_outcome(outcome)
}

// runHandler runs handler and settles what it did: Handled only when it returned nil; every other
// way out (an error, a panic) is a failure, with the best reason that can be recovered. Reading
// what the handler left (the error's text, the panic's value) runs the application's methods,
// which may panic in turn: that is caught too, never turned into success.
//
// The handler runs inline, on the calling goroutine (inside a cgo callback on a worker thread of
// the runtime). runtime.Goexit cannot be stopped and must not unwind through the C library's
// frames (the Go runtime aborts with "internal lockOSThread error"): callHandler recovers every
// panic, so when it does not return at all the goroutine is exiting, and the process ends here
// with a clear message. The fact is not settled, so it is delivered again after a restart.
func runHandler(handler func() error) (Outcome, string) {
	return runCallback(handlerCallback, handler)
}

// callbackKind names the application's function that a callback runs, in the reasons and in the
// message of exitOnGoexit.
type callbackKind struct {
	name   string // "handler"
	goexit string // written to stderr before the process exits with goexitExitCode
}

var handlerCallback = callbackKind{"handler", goexitMessage}

// runCallback is runHandler for any kind of callback (handlers, upcasters).
func runCallback(kind callbackKind, f func() error) (Outcome, string) {
	returned := false
	defer func() {
		if !returned {
			exitOnGoexitSaying(kind.goexit)
		}
	}()
	s := callHandler(kind, f)
	returned = true
	return s.outcome, s.reason
}

type settlement struct {
	outcome Outcome
	reason  string
}

// goexitMessage is written to stderr before the process exits with goexitExitCode.
const goexitMessage = "wharf: a handler called runtime.Goexit (t.Fatal, t.FailNow, t.SkipNow?), which " +
	"cannot cross the C library; the fact is not handled and will be delivered again; exiting"

const goexitExitCode = 2

// exitOnGoexit ends the process from a deferred function of a goroutine in runtime.Goexit.
func exitOnGoexit() { exitOnGoexitSaying(goexitMessage) }

// exitOnGoexitSaying is exitOnGoexit writing message to stderr.
func exitOnGoexitSaying(message string) {
	os.Stderr.WriteString(message + "\n")
	os.Exit(goexitExitCode)
}

func callHandler(kind callbackKind, handler func() error) (s settlement) {
	// Stands if settle panics (it protects every call of the application's methods).
	s = settlement{Failed, "reading the " + kind.name + "'s error panicked"}
	returned := false
	defer func() {
		p := recover()
		if !returned {
			// p is nil for panic(nil) (before Go 1.21) and during runtime.Goexit, where
			// callHandler never returns (runHandler ends the process).
			s = settlement{Failed, panicReason(kind, p)}
		}
	}()
	err := handler()
	returned = true
	return settle(kind, err)
}

// settle is the outcome and reason of a handler's returned error.
func settle(kind callbackKind, err error) settlement {
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
		s.reason = fmt.Sprintf("the %s returned a %T whose Error method panicked", kind.name, err)
	case text == "":
		s.reason = fmt.Sprintf("the %s returned a %T with an empty message", kind.name, err)
	default:
		s.reason = text
	}
	return s
}

// panicReason describes a recovered panic value without letting its formatting panic.
func panicReason(kind callbackKind, p any) string {
	if p == nil {
		return "the " + kind.name + " panicked with a nil value"
	}
	if text, ok := protect(func() string { return fmt.Sprint(p) }); ok {
		return "the " + kind.name + " panicked: " + text
	}
	return fmt.Sprintf("the %s panicked with a %T; its value could not be formatted", kind.name, p)
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

// inHandler reports whether the calling goroutine is running a handler: the shims mark their
// thread while a handler runs on it, and a goroutine inside a cgo callback stays on that thread.
// The calls that would wait for the handler's own delivery refuse it before taking the Go locks
// that a Runtime.Close or Engine.Close waiting for the handler holds (the C ABI refuses them on its
// worker threads too, but only once the call reaches it).
func inHandler() bool { return C.wharfgo_in_handler() != 0 }

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
