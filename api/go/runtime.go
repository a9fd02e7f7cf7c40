package wharf

/*
#include <wharf.h>
*/
import "C"

import (
	"errors"
	"sync"
)

// Outcome is what a handler did with a fact (wharf_outcome).
type Outcome int

// The outcomes a handler's error chooses (see Reject and Retry; any other error is Failed).
const (
	Handled  Outcome = C.WHARF_HANDLED
	Rejected Outcome = C.WHARF_REJECTED // refused for good: dead letter, the cursor passes it
	Failed   Outcome = C.WHARF_FAILED   // subscribers retry with backoff; projections: dead letter
	Retry    Outcome = C.WHARF_RETRY    // transient: retry after a backoff
)

type outcomeError struct {
	outcome Outcome
	err     error
}

func (e *outcomeError) Error() string { return e.err.Error() }
func (e *outcomeError) Unwrap() error { return e.err }

// Reject makes a handler give up on the fact for good: it becomes a dead letter with err's text.
func Reject(err error) error { return &outcomeError{Rejected, nonNil(err)} }

// RetryLater makes a handler retry the fact after a backoff (a transient failure).
func RetryLater(err error) error { return &outcomeError{Retry, nonNil(err)} }

func nonNil(err error) error {
	if err == nil {
		return errors.New("no reason given")
	}
	return err
}

// ProjectFunc handles one fact of a projection or reaction: its writes go into effects, which
// commit together with the consumer's cursor (exactly once). nil: handled; Reject(err): a dead
// letter; any other error or a panic: failed (a dead letter for a projection), its text the
// reason (runtime.Goexit ends the process: see SubscribeFunc). effects is valid only during the
// call and must not be committed; effects.Get reads what the batch wrote so far (see Txn.Get).
type ProjectFunc func(fact *Fact, effects *Txn) error

// SubscribeFunc handles one fact of a subscriber (side effects, at least once: make it idempotent
// by fact.ID). nil: handled; RetryLater(err): retried after a backoff; Reject(err): a dead letter;
// any other error or a panic: failed, retried with backoff.
//
// Only a nil return is success. An error whose Error method panics, or a panic whose value cannot
// be formatted, still fails the fact, with a reason saying so. A handler runs inline on a worker
// thread of the runtime (inside a cgo callback), where runtime.Goexit (t.Fatal, t.FailNow or
// t.SkipNow in a test) can neither be stopped nor unwind through the C library: the package then
// writes a line saying so to stderr and ends the process with os.Exit(2); the fact is not handled
// and is delivered again after a restart. From a handler, Engine.Close and the Runtime's methods (they would wait for
// the handler) return ErrInvalidArgument; Free does nothing.
type SubscribeFunc func(fact *Fact) error

// Runtime delivers durable facts to the consumers registered on it, in order within each
// partition, on worker threads: handlers run concurrently (one per partition lane) and must be
// safe for concurrent use. Register consumers, then Start (or Drain); Stop, then Free.
type Runtime struct {
	mu sync.RWMutex
	c  *C.wharf_runtime
}

// NewRuntime creates a runtime on engine. options: "" or "key=value;..." (workers, instance,
// lease_ms, renew_ms, backoff_initial_ms, backoff_max_ms, ...). Trace warnings go to stderr.
func NewRuntime(engine *Engine, options string) (*Runtime, error) {
	var args cArgs
	defer args.free()
	coptions := args.optional("options", options)
	if args.err != nil {
		return nil, args.err
	}
	var rt *C.wharf_runtime
	err := engine.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_runtime_new(c, coptions, &rt)
	})
	if err != nil {
		return nil, err
	}
	return &Runtime{c: rt}, nil
}

// with runs f with the runtime's handle, or returns an error and runs notCalled: ErrClosed after
// Free, ErrInvalidArgument from a handler (function names the call; refused before r.mu, which a
// Free waiting for the handler holds).
func (r *Runtime) with(function string, f func(*C.wharf_runtime) C.wharf_status,
	notCalled func()) error {
	if err := refuseInHandler(function); err != nil {
		if notCalled != nil {
			notCalled()
		}
		return err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.c == nil {
		if notCalled != nil {
			notCalled()
		}
		return &Error{Status: StatusClosed, Message: "the runtime was freed"}
	}
	return call(func() C.wharf_status { return f(r.c) })
}

// Project registers a projection: handler's effects commit with the cursor, exactly once.
// options: "" or consumer options ("batch_facts=100;consumer_id=..."), the same for React and
// Subscribe; among them payload_version: latest (the default: facts arrive upcast to their type's
// declared version, Engine.RegisterUpcaster) or stored (as stored; no upcaster runs).
func (r *Runtime) Project(name string, types []string, options string, handler ProjectFunc) error {
	return r.register(registerProject, name, types, options, handler)
}

// React registers a reaction: a projection whose effects may also emit facts.
func (r *Runtime) React(name string, types []string, options string, handler ProjectFunc) error {
	return r.register(registerReact, name, types, options, handler)
}

// Subscribe registers a subscriber: side effects, at least once.
func (r *Runtime) Subscribe(name string, types []string, options string, handler SubscribeFunc) error {
	return r.register(registerSubscribe, name, types, options, handler)
}

// Start loads the cursors and starts delivering on the worker threads.
func (r *Runtime) Start() error {
	return r.with("Runtime.Start", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_start(rt)
	}, nil)
}

// Drain delivers everything pending to every durable consumer and returns when all are caught up.
func (r *Runtime) Drain() error {
	return r.with("Runtime.Drain", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_drain(rt)
	}, nil)
}

// Stop finishes the batches in flight, persists cursors, releases leases. Idempotent.
func (r *Runtime) Stop() error {
	return r.with("Runtime.Stop", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_stop(rt)
	}, nil)
}

// Free stops the runtime and releases it and its handlers. Idempotent. Must not be called from a
// handler (there it does nothing).
func (r *Runtime) Free() {
	if inHandler() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		C.wharf_runtime_free(r.c)
		r.c = nil
	}
}
