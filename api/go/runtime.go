package wharf

/*
#include <stdlib.h>
#include <wharf.h>

wharf_status runtime_new_go(wharf_engine* engine, const char* options, void* trace_ctx,
                            wharf_runtime** out);
*/
import "C"

import (
	"context"
	"errors"
	"sync"
	"unsafe"
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
// and is delivered again after a restart. From a handler, Engine.Close and the Runtime's methods
// (they would wait for the handler) return ErrInvalidArgument.
type SubscribeFunc func(fact *Fact) error

// Runtime delivers durable facts to the consumers registered on it, in order within each
// partition, on worker threads: handlers run concurrently (one per partition lane) and must be
// safe for concurrent use. Register consumers, then Start (or Drain); Close when done.
type Runtime struct {
	mu      sync.RWMutex
	c       *C.wharf_runtime
	traceID uint64 // its trace function's key in traceFuncs (0: none)
}

// RuntimeOption configures NewRuntime beyond its options string (WithTrace).
type RuntimeOption func(*runtimeConfig)

type runtimeConfig struct {
	trace TraceFunc
}

// NewRuntime creates a runtime on engine. options: "" or "key=value;..." (workers, instance,
// lease_ms, renew_ms, backoff_initial_ms, backoff_max_ms, lane_batches_in_flight, config, ...:
// wharf_runtime_new in wharf.h). Trace warnings and errors go to stderr unless WithTrace is given.
// ErrInvalidArgument names a bad option; ErrClosed: the engine is closed.
func NewRuntime(engine *Engine, options string, opts ...RuntimeOption) (*Runtime, error) {
	var config runtimeConfig
	for _, opt := range opts {
		if opt == nil {
			return nil, &Error{Status: StatusInvalidArgument,
				Message: "NewRuntime: a RuntimeOption is nil"}
		}
		opt(&config)
	}
	var args cArgs
	defer args.free()
	coptions := args.optional("options", options)
	if args.err != nil {
		return nil, args.err
	}
	var traceCell unsafe.Pointer
	var traceID uint64
	if config.trace != nil {
		traceID, traceCell = registerTrace(config.trace)
	}
	var rt *C.wharf_runtime
	err := engine.with(func(c *C.wharf_engine) C.wharf_status {
		return C.runtime_new_go(c, coptions, traceCell, &rt)
	})
	if err != nil {
		if traceCell != nil {
			unregisterTrace(traceID)
			C.free(traceCell) // a failed wharf_runtime_new_v2 keeps nothing
		}
		return nil, err
	}
	return &Runtime{c: rt, traceID: traceID}, nil
}

// with runs f with the runtime's handle, or returns an error and runs notCalled: ErrClosed after
// Close, ErrInvalidArgument from a handler (function names the call; refused before r.mu, which a
// Close waiting for the handler holds).
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
		return &Error{Status: StatusClosed, Message: function + ": the runtime is closed"}
	}
	return call(func() C.wharf_status { return f(r.c) })
}

// Project registers a projection: handler's effects commit with the cursor, exactly once.
// options: "" or consumer options "key=value;...", the same for React, Subscribe and
// SubscribeAsync: consumer_id (the cursor's name; default name), batch_facts (facts per commit),
// max_depth (reactions), ordering (partition | global | none), max_attempts (deliveries of a fact
// before it becomes a dead letter "attempts-exhausted: ..."; 0: no limit) and payload_version:
// latest (the default: facts arrive upcast to their type's declared version,
// Engine.RegisterUpcaster) or stored (as stored; no upcaster runs). Subscribers also take
// key_concurrency, key_window_facts and handler_timeout_ms (see SubscribeAsync). A bad option is
// ErrInvalidArgument naming it.
func (r *Runtime) Project(name string, types []string, options string, handler ProjectFunc) error {
	if handler == nil {
		return nilHandler("Runtime.Project")
	}
	return r.register(registerProject, name, types, options, handler)
}

// React registers a reaction: a projection whose effects may also emit facts.
func (r *Runtime) React(name string, types []string, options string, handler ProjectFunc) error {
	if handler == nil {
		return nilHandler("Runtime.React")
	}
	return r.register(registerReact, name, types, options, handler)
}

// Subscribe registers a subscriber: side effects, at least once. With key_concurrency=N in
// options, up to N facts of different keys of one partition are in the handler at once (facts of
// one key never overlap and arrive in id order); a fact that keeps failing holds back only the
// later facts of its key.
func (r *Runtime) Subscribe(name string, types []string, options string, handler SubscribeFunc) error {
	if handler == nil {
		return nilHandler("Runtime.Subscribe")
	}
	return r.register(registerSubscribe, name, types, options, handler)
}

// Relay registers a relay: a durable consumer that publishes the facts of types to a broker,
// pipelined, in order per partition, advancing its cursor only over what the broker acknowledged.
// options (required): "kind=redis_streams;url=..." or "kind=nats_jetstream;url=...", with the
// keys of wharf_runtime_relay in wharf.h (stream, subject, maxlen, timeout_ms, in_flight, user,
// password, token, id_prefix, create_stream, consumer_id, batch_facts, ordering, relay_payload).
// A fact the broker refuses for good becomes a dead letter "broker-rejected: ...".
// ErrInvalidArgument names a missing kind, an unknown key or a bad value.
func (r *Runtime) Relay(name string, types []string, options string) error {
	var args cArgs
	defer args.free()
	cname := args.str("name", name)
	ctypes := args.list("types", types)
	coptions := args.str("options", options)
	if args.err != nil {
		return args.err
	}
	return r.with("Runtime.Relay", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_relay(rt, cname, ctypes, C.size_t(len(types)), coptions)
	}, nil)
}

func nilHandler(function string) error {
	return &Error{Status: StatusInvalidArgument, Message: function + ": the handler is nil"}
}

// Start loads the cursors and starts delivering on the worker threads.
func (r *Runtime) Start() error {
	return r.with("Runtime.Start", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_start(rt)
	}, nil)
}

// Drain delivers everything pending to every durable consumer and returns when all are caught up
// (DrainContext with context.Background()).
func (r *Runtime) Drain() error {
	return r.with("Runtime.Drain", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_drain(rt)
	}, nil)
}

// DrainContext is Drain bounded by ctx: when ctx ends first it returns ctx.Err() at once. The C
// library cannot interrupt a drain, so the drain itself goes on in the background until the
// consumers are caught up (every fact it delivers is delivered as by Drain: the engine stays
// consistent), and Stop and Close wait for it. Handlers are not told: a handler that waits for
// something of its own should watch its own context.
func (r *Runtime) DrainContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return r.Drain()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := refuseInHandler("Runtime.DrainContext"); err != nil {
		return err
	}
	done := make(chan error, 1)
	// The drain holds r.mu for reading until it ends: Stop and Close wait for it.
	go func() { done <- r.Drain() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop finishes the batches in flight, persists cursors, releases leases. Idempotent.
func (r *Runtime) Stop() error {
	return r.with("Runtime.Stop", func(rt *C.wharf_runtime) C.wharf_status {
		return C.wharf_runtime_stop(rt)
	}, nil)
}

// Close stops the runtime (as Stop: it finishes the batches in flight and waits for a drain in
// progress), releases it and its handlers, and returns the stop's error. Idempotent: a closed
// runtime's calls return ErrClosed. Runtime satisfies io.Closer. From a handler (of any runtime)
// it is refused with ErrInvalidArgument and does nothing: it would wait for that handler. After
// Engine.Close it only releases the runtime (the engine stopped it).
func (r *Runtime) Close() error {
	if err := refuseInHandler("Runtime.Close"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	err := call(func() C.wharf_status { return C.wharf_runtime_stop(r.c) })
	if errors.Is(err, ErrClosed) {
		err = nil // the engine was closed first: it stopped the runtime
	}
	C.wharf_runtime_free(r.c)
	r.c = nil
	unregisterTrace(r.traceID) // events the library still sends are dropped
	r.traceID = 0
	return err
}

// Free is Close without its error.
//
// Deprecated: use Close (io.Closer). Free is kept for one release.
func (r *Runtime) Free() { _ = r.Close() }
