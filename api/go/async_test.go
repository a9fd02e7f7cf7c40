package wharf_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	wharf "github.com/wharf/wharf/api/go"
)

// waitUntil polls cond every 2 ms for up to 20 s (deliveries run on the runtime's threads).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// cursorPassed reports whether consumer's cursor in partition is at factID or beyond.
func cursorPassed(t *testing.T, engine *wharf.Engine, consumer string, partition uint32,
	factID uint64) bool {
	t.Helper()
	at, err := engine.Cursor(consumer, partition)
	if err != nil && !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("cursor of %s: %v", consumer, err)
	}
	return at >= factID
}

// An asynchronous subscriber's deliveries are completed from goroutines other than the handler's;
// the cursor passes the facts only once they are done, and a second completion is refused with
// an error naming the call that completed it first.
func TestAsyncDeliveryCompletedFromAnotherGoroutine(t *testing.T) {
	engine := open(t, "partitions=1")
	var last uint64
	for i := 1; i <= 5; i++ {
		last = commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	deliveries := make(chan *wharf.Delivery, 16)
	err = rt.SubscribeAsync("mailer", []string{"OrderPlaced"}, "", func(f *wharf.Fact, d *wharf.Delivery) {
		if d.FactID() != f.ID {
			t.Errorf("delivery of fact %d says fact %d", f.ID, d.FactID())
		}
		deliveries <- d // completed by the test's goroutine below
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	var completed []*wharf.Delivery
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(completed) < 5 {
			d := <-deliveries
			if err := d.Done(); err != nil {
				t.Errorf("Done of fact %d: %v", d.FactID(), err)
			}
			completed = append(completed, d)
		}
	}()
	<-done
	waitUntil(t, "the cursor to pass every fact", func() bool {
		return cursorPassed(t, engine, "mailer", 0, last)
	})
	for i, d := range completed {
		if d.FactID() != uint64(i+1) {
			t.Errorf("delivery %d carried fact %d, want %d (id order)", i, d.FactID(), i+1)
		}
	}
	err = completed[0].Retry(errors.New("again"))
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "Delivery.Retry") ||
		!strings.Contains(err.Error(), "completed already (by Done)") {
		t.Fatalf("second completion: %v, want ErrInvalidArgument naming both calls", err)
	}
}

// Every way a delivery can fail — Fail, Retry, Complete with an error whose Error method panics,
// a completion after handler_timeout_ms, a panicking handler — redelivers the fact: none of them
// is ever counted as handled. A completion the library refuses returns its error.
func TestAsyncFailedCompletionNeverCountsAsSuccess(t *testing.T) {
	engine := open(t, "partitions=1")
	var ids []uint64
	for i := 1; i <= 5; i++ {
		ids = append(ids, commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i))
	}
	rt, err := wharf.NewRuntime(engine, "workers=1;backoff_initial_ms=1;backoff_max_ms=5")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var mu sync.Mutex
	attempts := map[uint64][]uint32{}
	lateErr := make(chan error, 1)
	redelivered := make(chan struct{}) // closed when ids[3] comes again: its first delivery timed out
	err = rt.SubscribeAsync("flaky", []string{"OrderPlaced"}, "handler_timeout_ms=100",
		func(f *wharf.Fact, d *wharf.Delivery) {
			mu.Lock()
			attempts[f.ID] = append(attempts[f.ID], f.Attempt)
			mu.Unlock()
			if f.Attempt > 1 {
				if f.ID == ids[3] && f.Attempt == 2 {
					close(redelivered)
				}
				go d.Done()
				return
			}
			switch f.ID {
			case ids[0]:
				go d.Fail(errors.New("smtp down"))
			case ids[1]:
				go d.Retry(errors.New("smtp busy"))
			case ids[2]:
				go d.Complete(explosiveError{})
			case ids[3]:
				go func() { // too late: the delivery timed out (handler_timeout_ms) meanwhile
					<-redelivered
					lateErr <- d.Done()
				}()
			case ids[4]:
				panic("handler bug")
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every fact to be handled", func() bool {
		return cursorPassed(t, engine, "flaky", 0, ids[4])
	})
	if err := <-lateErr; err == nil {
		t.Fatal("Done after the delivery timed out returned nil: a refused completion must fail")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		got := attempts[id]
		if len(got) < 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("fact %d delivered with attempts %v, want [1 2 ...]: its failed first "+
				"delivery was taken for success", id, got)
		}
	}
}

// With key_concurrency, facts of different keys of one partition are in the handler at once,
// while the facts of each key arrive in id order and never overlap.
func TestKeyConcurrencyKeepsPerKeyOrder(t *testing.T) {
	engine := open(t, "partitions=1")
	const keys, perKey = 6, 15
	var last uint64
	for i := 0; i < perKey; i++ {
		txn, err := engine.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < keys; k++ {
			if err := txn.Emit("OrderPlaced", []byte(fmt.Sprintf("k%d", k)),
				[]byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if last, err = txn.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := wharf.NewRuntime(engine, "workers=2")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var mu sync.Mutex
	inFlight := map[string]bool{}
	order := map[string][]string{}
	concurrent, concurrentMax := 0, 0
	err = rt.SubscribeAsync("fanout", []string{"OrderPlaced"}, "key_concurrency=8",
		func(f *wharf.Fact, d *wharf.Delivery) {
			key := string(f.Key)
			mu.Lock()
			if inFlight[key] {
				t.Errorf("two facts of key %s in flight at once", key)
			}
			inFlight[key] = true
			order[key] = append(order[key], string(f.Payload))
			concurrent++
			if concurrent > concurrentMax {
				concurrentMax = concurrent
			}
			mu.Unlock()
			go func() {
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				inFlight[key] = false
				concurrent--
				mu.Unlock()
				if err := d.Done(); err != nil {
					t.Errorf("Done: %v", err)
				}
			}()
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every fact to be handled", func() bool {
		return cursorPassed(t, engine, "fanout", 0, last)
	})
	mu.Lock()
	defer mu.Unlock()
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%d", k)
		got := order[key]
		if len(got) != perKey {
			t.Fatalf("key %s: %d facts, want %d", key, len(got), perKey)
		}
		for i, payload := range got {
			if payload != fmt.Sprint(i) {
				t.Fatalf("key %s received %v: not in id order", key, got)
			}
		}
	}
	if concurrentMax < 2 {
		t.Fatalf("at most %d fact in flight with key_concurrency=8 over %d keys", concurrentMax, keys)
	}
}

// A panicking asynchronous handler fails its delivery; the Delivery it was given then refuses a
// completion, naming the panic.
func TestAsyncHandlerPanicCompletesTheDelivery(t *testing.T) {
	engine := open(t, "partitions=1")
	first := commitOrder(t, engine, "o-1", "alice", 1)
	rt, err := wharf.NewRuntime(engine, "workers=1;backoff_initial_ms=1")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	kept := make(chan *wharf.Delivery, 1)
	err = rt.SubscribeAsync("panicky", []string{"OrderPlaced"}, "max_attempts=1",
		func(f *wharf.Fact, d *wharf.Delivery) {
			kept <- d
			panic("boom")
		})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	d := <-kept
	err = d.Done()
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("Done after the handler panicked: %v", err)
	}
	letters, err := engine.DeadLetters("panicky")
	if err != nil || len(letters) != 1 || letters[0].Fact.ID != first ||
		!strings.Contains(letters[0].Reason, "boom") {
		t.Fatalf("dead letters: %+v %v, want fact %d with the panic as reason", letters, err, first)
	}
}

func TestAsyncBadInputIsNamed(t *testing.T) {
	engine := open(t, "")
	rt, err := wharf.NewRuntime(engine, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	err = rt.SubscribeAsync("a", []string{"OrderPlaced"}, "", nil)
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "SubscribeAsync") {
		t.Fatalf("nil handler: %v", err)
	}
	noop := func(*wharf.Fact, *wharf.Delivery) {}
	err = rt.SubscribeAsync("a", []string{"OrderPlaced"}, "key_concurrency=0", noop)
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "key_concurrency") {
		t.Fatalf("key_concurrency=0: %v", err)
	}
	err = rt.SubscribeAsync("a\x00b", []string{"OrderPlaced"}, "", noop)
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "name") {
		t.Fatalf("a name with a NUL byte: %v", err)
	}
}
