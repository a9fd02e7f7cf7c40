package wharf_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"wharf"
)

func open(t *testing.T, options string) *wharf.Engine {
	t.Helper()
	engine, err := wharf.Open(filepath.Join(t.TempDir(), "db"), options)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { engine.Close() })
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		t.Fatalf("declare: %v", err)
	}
	return engine
}

func commitOrder(t *testing.T, engine *wharf.Engine, id, customer string, cents int) uint64 {
	t.Helper()
	txn, err := engine.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Put("orders", []byte(id), []byte(fmt.Sprint(cents))); err != nil {
		t.Fatal(err)
	}
	if err := txn.Emit("OrderPlaced", []byte(customer), []byte(fmt.Sprintf("%s:%d", id, cents))); err != nil {
		t.Fatal(err)
	}
	last, err := txn.Commit()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return last
}

func TestCommitGetAndReadFacts(t *testing.T) {
	engine := open(t, "partitions=4")
	if id := commitOrder(t, engine, "o-1", "alice", 1250); id != 1 {
		t.Fatalf("first fact id %d, want 1", id)
	}
	commitOrder(t, engine, "o-2", "alice", 700)
	value, err := engine.Get("orders", []byte("o-2"))
	if err != nil || string(value) != "700" {
		t.Fatalf("get o-2: %q %v", value, err)
	}
	if _, err := engine.Get("orders", []byte("o-9")); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("get of an absent key: %v, want ErrNotFound", err)
	}
	lsn, err := engine.DurableLSN()
	if err != nil || lsn != 2 {
		t.Fatalf("durable lsn %d %v", lsn, err)
	}
	partition, _ := engine.PartitionOf([]byte("alice"))
	facts, err := engine.ReadFacts(partition, 0, 10)
	if err != nil || len(facts) != 2 {
		t.Fatalf("read facts: %d %v", len(facts), err)
	}
	if facts[0].Type != "OrderPlaced" || string(facts[1].Payload) != "o-2:700" ||
		string(facts[0].Key) != "alice" || facts[1].ID != 2 || facts[0].CommitMs == 0 {
		t.Fatalf("facts read back wrong: %+v %+v", facts[0], facts[1])
	}
}

func TestBadInputIsNamed(t *testing.T) {
	engine := open(t, "")
	txn, _ := engine.Begin()
	err := txn.Emit("Nope", []byte("k"), []byte("p"))
	var werr *wharf.Error
	if !errors.As(err, &werr) || werr.Status != wharf.StatusInvalidArgument ||
		!strings.Contains(werr.Message, "Nope") {
		t.Fatalf("emit of an undeclared type: %v", err)
	}
	txn.Abort()
	if _, err := wharf.Open(t.TempDir(), "partitions=banana"); !errors.Is(err, wharf.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "partitions") {
		t.Fatalf("bad option: %v", err)
	}
	engine.Close()
	if _, err := engine.Begin(); !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("begin after close: %v", err)
	}
}

func TestProjectionAndSubscriber(t *testing.T) {
	engine := open(t, "partitions=4")
	for i := 1; i <= 20; i++ {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), fmt.Sprintf("c-%d", i%3), i*100)
	}
	runtime, err := wharf.NewRuntime(engine, "workers=2;backoff_initial_ms=1")
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.Free()
	err = runtime.Project("totals", []string{"OrderPlaced"}, "", func(f *wharf.Fact, effects *wharf.Txn) error {
		id, cents, _ := strings.Cut(string(f.Payload), ":")
		if id == "o-13" {
			return wharf.Reject(errors.New("order 13 is malformed"))
		}
		return effects.Put("totals", []byte(id), []byte(cents))
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []uint64
	attempts := map[uint64]int{}
	err = runtime.Subscribe("mailer", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[f.ID]++
		if int(f.Attempt) != attempts[f.ID] {
			t.Errorf("fact %d: Attempt %d on delivery %d", f.ID, f.Attempt, attempts[f.ID])
		}
		if f.ID == 5 && attempts[f.ID] == 1 {
			return wharf.RetryLater(errors.New("smtp busy"))
		}
		if f.ID == 7 && attempts[f.ID] == 1 {
			panic("handler bug")
		}
		seen = append(seen, f.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Drain answers ErrBusy while a subscriber waits for a retry: drain again after the backoff.
	for tries := 0; ; tries++ {
		err := runtime.Drain()
		if err == nil {
			break
		}
		if !errors.Is(err, wharf.ErrBusy) || tries == 100 {
			t.Fatalf("drain: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if value, err := engine.Get("totals", []byte("o-20")); err != nil || string(value) != "2000" {
		t.Fatalf("projected o-20: %q %v", value, err)
	}
	if _, err := engine.Get("totals", []byte("o-13")); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("a rejected fact was projected: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
	if len(seen) != 20 || seen[0] != 1 || seen[19] != 20 {
		t.Fatalf("subscriber saw %v, want every fact 1..20 once handled", seen)
	}
	if attempts[5] != 2 || attempts[7] != 2 {
		t.Fatalf("retry and panic were not retried once: %v", attempts)
	}
}

func TestRegistrationErrors(t *testing.T) {
	engine := open(t, "")
	runtime, err := wharf.NewRuntime(engine, "")
	if err != nil {
		t.Fatal(err)
	}
	err = runtime.Subscribe("", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil })
	if !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}
	runtime.Free()
	err = runtime.Subscribe("late", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil })
	if !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("after Free: %v", err)
	}
	if _, err := wharf.NewRuntime(engine, "workers=x"); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("bad runtime option: %v", err)
	}
}
