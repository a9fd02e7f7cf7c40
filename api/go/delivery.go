package wharf

// Asynchronous subscribers: a handler hands each fact to work of its own and returns; the work
// completes the fact's Delivery later, from any goroutine.

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// AsyncSubscribeFunc receives one fact of an asynchronous subscriber (Runtime.SubscribeAsync)
// and the Delivery to complete for it, exactly once, now or later, from any goroutine: typically
// it starts a goroutine (or queues the fact) and returns at once. fact is the handler's own copy;
// delivery stays valid after it returns. It runs inline on a worker thread of the runtime, as a
// SubscribeFunc does (see there for runtime.Goexit); a panic before the delivery was completed
// completes it as failed, with the panic as the reason (a later completion then returns an
// error). Facts of one key come in id order and never overlap: the next fact of a key comes only
// once the delivery of the one before is completed.
type AsyncSubscribeFunc func(fact *Fact, delivery *Delivery)

// Delivery is one delivery of a fact to an asynchronous subscriber. Complete it exactly once,
// with Done, Retry, Reject, Fail or Complete, from any goroutine (also before its handler
// returned); a second completion changes nothing and returns ErrInvalidArgument saying which call
// completed it. A completion the library refuses returns its error, and the fact is then not
// counted as handled: ErrInvalidArgument when the delivery timed out (handler_timeout_ms: it is
// delivered again) or the consumer moved to another instance, ErrClosed when its runtime stopped
// first (delivered again when the consumer runs next).
//
// A delivery that is never completed (forgotten) counts as failed once handler_timeout_ms
// (consumer option, default 30000) has passed, and the fact is delivered again; meanwhile the
// later facts of its key wait, and a drain waits for it. Nothing else leaks: a Delivery holds no
// C memory.
type Delivery struct {
	id       C.wharf_delivery
	factID   uint64
	consumer string

	mu          sync.Mutex
	completedBy string // the call that completed it ("" while pending)
}

// FactID is the id of the fact this delivery carries.
func (d *Delivery) FactID() uint64 { return d.factID }

// Done completes the delivery as handled: the cursor may pass the fact.
func (d *Delivery) Done() error { return d.complete("Done", Handled, "") }

// Retry completes the delivery as a transient failure: the fact is delivered again after a
// backoff (up to max_attempts), with reason's text as the failure's reason.
func (d *Delivery) Retry(reason error) error {
	return d.complete("Retry", Retry, reasonText(reason))
}

// Reject completes the delivery as refused for good: the fact becomes a dead letter
// "handler-rejected: <reason>" and its key moves on.
func (d *Delivery) Reject(reason error) error {
	return d.complete("Reject", Rejected, reasonText(reason))
}

// Fail completes the delivery as failed: the fact is delivered again after a backoff (up to
// max_attempts), with reason's text as the failure's reason.
func (d *Delivery) Fail(reason error) error {
	return d.complete("Fail", Failed, reasonText(reason))
}

// Complete completes the delivery as a SubscribeFunc returning err would: nil is Done;
// RetryLater(e) Retry; Reject(e) Reject; any other error Fail (also one whose Error method
// panics: never taken for success).
func (d *Delivery) Complete(err error) error {
	s := settle(handlerCallback, err)
	return d.complete("Complete", s.outcome, s.reason)
}

// reasonText is the reason of a failure completed with reason (never "": the library names the
// outcome then, but a reason saying none was given reads better in a dead letter).
func reasonText(reason error) string {
	if reason == nil {
		return "no reason given"
	}
	return settle(handlerCallback, reason).reason
}

// claim marks the delivery completed by method; false (and who did) when it was completed
// already.
func (d *Delivery) claim(method string) (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.completedBy != "" {
		return false, d.completedBy
	}
	d.completedBy = method
	return true, ""
}

func (d *Delivery) complete(method string, outcome Outcome, reason string) error {
	if ok, by := d.claim(method); !ok {
		return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"Delivery.%s: the delivery of fact %d to %q was completed already (by %s); a "+
				"delivery is completed exactly once", method, d.factID, d.consumer, by)}
	}
	var args cArgs
	defer args.free()
	// A NUL byte would end the C string there: written as \0, the reason arrives whole.
	creason := args.optional("reason", strings.ReplaceAll(reason, "\x00", `\0`))
	return call(func() C.wharf_status {
		return C.wharf_delivery_done(d.id, C.wharf_outcome(outcome), creason)
	})
}

// asyncSubscriber is what an asynchronous subscriber's cell holds.
type asyncSubscriber struct {
	consumer string
	handler  AsyncSubscribeFunc
}

// SubscribeAsync registers an asynchronous subscriber: side effects, at least once, where the
// handler completes each fact's Delivery later (see AsyncSubscribeFunc and Delivery). options as
// Subscribe (ordering partition or none), among them key_concurrency (1..4096, default 1: how
// many facts of different keys of one partition may be in flight at once; facts of one key never
// overlap and come in id order), key_window_facts (facts a lane holds beyond its cursor, default
// max(1024, 16 x key_concurrency)), max_attempts and handler_timeout_ms (a delivery not completed
// within it counts as failed and is delivered again; default 30000).
func (r *Runtime) SubscribeAsync(name string, types []string, options string,
	handler AsyncSubscribeFunc) error {
	if handler == nil {
		return nilHandler("Runtime.SubscribeAsync")
	}
	return r.register(registerSubscribeAsync, name, types, options,
		&asyncSubscriber{consumer: name, handler: handler})
}

//export wharfGoSubscribeAsync
func wharfGoSubscribeAsync(ctx unsafe.Pointer, fact *C.wharf_fact,
	delivery C.wharf_delivery) C.wharf_outcome {
	subscriber := cellValue(ctx).(*asyncSubscriber)
	copied := copyFact(fact)
	d := &Delivery{id: delivery, factID: copied.ID, consumer: subscriber.consumer}
	outcome, reason := runHandler(func() error {
		subscriber.handler(copied, d)
		return nil
	})
	if outcome == Handled {
		return C.WHARF_PENDING // completed already, or to be completed through d
	}
	// The handler panicked. Not completed yet: it fails now, and a later completion is refused.
	// Completed already (before the panic): that completion stands.
	if ok, _ := d.claim("the handler's panic"); ok {
		setReason(fact, reason)
		return C.WHARF_FAILED
	}
	return C.WHARF_PENDING
}
