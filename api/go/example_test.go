package wharf_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	wharf "github.com/wharf/wharf/api/go"
)

// openExample opens a database in a new temporary directory; cleanup closes it and removes the
// directory.
func openExample() (engine *wharf.Engine, cleanup func()) {
	dir, err := os.MkdirTemp("", "wharf-example")
	if err != nil {
		log.Fatal(err)
	}
	engine, err = wharf.Open(filepath.Join(dir, "shop"), "partitions=4")
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		log.Fatal(err)
	}
	return engine, func() {
		engine.Close()
		os.RemoveAll(dir)
	}
}

// Commit a state change together with a fact, then project the fact exactly once.
func Example() {
	dir, err := os.MkdirTemp("", "wharf-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	engine, err := wharf.Open(filepath.Join(dir, "shop"), "partitions=4")
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		log.Fatal(err)
	}

	txn, err := engine.Begin()
	if err != nil {
		log.Fatal(err)
	}
	txn.Put("orders", []byte("o-1"), []byte(`{"cents":1250}`))
	txn.Emit("OrderPlaced", []byte("alice"), []byte("o-1"))
	id, err := txn.Commit() // nil: durable on disk, state and fact together
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed fact", id)

	runtime, err := wharf.NewRuntime(engine, "workers=2")
	if err != nil {
		log.Fatal(err)
	}
	defer runtime.Close()
	err = runtime.Project("order-index", []string{"OrderPlaced"}, "",
		func(fact *wharf.Fact, effects *wharf.Txn) error { // exactly once, with the cursor
			return effects.Put("by-customer", fact.Key, fact.Payload)
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := runtime.Drain(); err != nil { // or Start, to deliver in the background
		log.Fatal(err)
	}
	value, err := engine.Get("by-customer", []byte("alice"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice: %s\n", value)
	// Output:
	// committed fact 1
	// alice: o-1
}

// An asynchronous subscriber hands each fact to a goroutine, which completes its Delivery once
// the side effect is done. Facts of one key come in order; key_concurrency lets facts of
// different keys overlap.
func ExampleRuntime_SubscribeAsync() {
	engine, cleanup := openExample()
	defer cleanup()
	for _, customer := range []string{"alice", "bob", "alice"} {
		txn, _ := engine.Begin()
		txn.Emit("OrderPlaced", []byte(customer), []byte("order of "+customer))
		if _, err := txn.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	runtime, err := wharf.NewRuntime(engine, "workers=2")
	if err != nil {
		log.Fatal(err)
	}
	defer runtime.Close()
	var mu sync.Mutex
	sent := map[string]int{}
	err = runtime.SubscribeAsync("mailer", []string{"OrderPlaced"}, "key_concurrency=16",
		func(fact *wharf.Fact, delivery *wharf.Delivery) {
			go func() { // the handler returns at once; the work completes the delivery
				mu.Lock()
				sent[string(fact.Key)]++
				mu.Unlock()
				if err := delivery.Done(); err != nil { // exactly once: Done, Retry, Reject, Fail
					log.Print(err)
				}
			}()
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := runtime.Drain(); err != nil { // returns once every delivery is completed
		log.Fatal(err)
	}
	mu.Lock()
	fmt.Println("alice:", sent["alice"], "bob:", sent["bob"])
	mu.Unlock()
	// Output:
	// alice: 2 bob: 1
}

// A read-modify-write runs in Transact, which commits it and runs it again when something it
// read changed meanwhile. The context bounds the whole loop.
func ExampleEngine_TransactContext() {
	engine, cleanup := openExample()
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	increment := func(txn *wharf.Txn) error {
		count := 0
		value, err := txn.Get("counters", []byte("orders"))
		switch {
		case err == nil:
			count, _ = strconv.Atoi(string(value))
		case !errors.Is(err, wharf.ErrNotFound):
			return err
		}
		return txn.Put("counters", []byte("orders"), []byte(strconv.Itoa(count+1)))
	}
	for i := 0; i < 3; i++ {
		if _, err := engine.TransactContext(ctx, increment); err != nil {
			log.Fatal(err)
		}
	}
	value, _ := engine.Get("counters", []byte("orders"))
	fmt.Printf("orders: %s\n", value)
	// Output:
	// orders: 3
}

// Headers, a payload version and a delivery time travel with a fact (EmitOptions); a handler
// reads them from the Fact, with the attempt number of the delivery.
func ExampleTxn_EmitWith() {
	engine, cleanup := openExample()
	defer cleanup()
	txn, _ := engine.Begin()
	err := txn.EmitWith("OrderPlaced", []byte("alice"), []byte("o-1"), wharf.EmitOptions{
		Headers: []wharf.Header{{Name: "trace-id", Value: []byte("4bf92f35")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := txn.Commit(); err != nil {
		log.Fatal(err)
	}
	runtime, _ := wharf.NewRuntime(engine, "workers=1")
	defer runtime.Close()
	runtime.Subscribe("audit", []string{"OrderPlaced"}, "", func(fact *wharf.Fact) error {
		fmt.Printf("fact %d v%d attempt %d trace-id=%s\n", fact.ID, fact.Version, fact.Attempt,
			fact.Headers["trace-id"])
		return nil
	})
	if err := runtime.Drain(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// fact 1 v1 attempt 1 trace-id=4bf92f35
}

// The admin calls read and move consumers' cursors, as `wharf cursor` does.
func ExampleEngine_Cursors() {
	engine, cleanup := openExample()
	defer cleanup()
	txn, _ := engine.Begin()
	txn.Emit("OrderPlaced", []byte("alice"), []byte("o-1"))
	last, _ := txn.Commit()
	runtime, _ := wharf.NewRuntime(engine, "workers=1")
	runtime.Subscribe("audit", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil })
	if err := runtime.Drain(); err != nil {
		log.Fatal(err)
	}
	runtime.Close()
	if err := engine.CopyCursors("audit", "audit-v2", false); err != nil { // a renamed consumer
		log.Fatal(err)
	}
	cursors, err := engine.Cursors()
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range cursors {
		if c.FactID == last {
			fmt.Printf("%s has passed fact %d\n", c.Consumer, c.FactID)
		}
	}
	// Output:
	// audit has passed fact 1
	// audit-v2 has passed fact 1
}
