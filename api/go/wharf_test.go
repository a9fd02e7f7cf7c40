package wharf_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wharf "github.com/wharf/wharf/api/go"
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
	defer runtime.Close()
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
	runtime.Close()
	err = runtime.Subscribe("late", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil })
	if !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("after Free: %v", err)
	}
	if _, err := wharf.NewRuntime(engine, "workers=x"); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("bad runtime option: %v", err)
	}
}

// Values whose formatting panics, with a value whose formatting panics again (fmt gives up on a
// nested panic and panics itself).
type explosive struct{}

func (explosive) String() string { panic(explosive{}) }

type explosiveError struct{}

func (explosiveError) Error() string { panic(explosive{}) }

type nilReceiverError struct{ text string }

func (e *nilReceiverError) Error() string { return e.text } // panics on a nil *nilReceiverError

// Every way out of a handler but a nil return is a failure, whatever reading it does: the outcome
// and the reason, case by case.
func TestEveryFailureOfAHandlerSettlesAsFailed(t *testing.T) {
	var typedNil *nilReceiverError
	cases := []struct {
		name    string
		handler func() error
		outcome wharf.Outcome
		reason  string // a prefix of the reason
	}{
		{"nil", func() error { return nil }, wharf.Handled, ""},
		{"error", func() error { return errors.New("smtp down") }, wharf.Failed, "smtp down"},
		{"reject", func() error { return wharf.Reject(errors.New("bad")) }, wharf.Rejected, "bad"},
		{"retry wrapped", func() error { return fmt.Errorf("ctx: %w", wharf.RetryLater(errors.New("busy"))) },
			wharf.Retry, "ctx: busy"},
		{"panic", func() error { panic("handler bug") }, wharf.Failed, "the handler panicked: handler bug"},
		{"panic unformattable", func() error { panic(explosive{}) }, wharf.Failed,
			"the handler panicked with a wharf_test.explosive; its value could not be formatted"},
		{"panic nil", func() error { panic(nil) }, wharf.Failed, "the handler panicked"},
		{"error method panics", func() error { return explosiveError{} }, wharf.Failed,
			"the handler returned a wharf_test.explosiveError whose Error method panicked"},
		{"typed nil error", func() error { return typedNil }, wharf.Failed,
			"the handler returned a *wharf_test.nilReceiverError whose Error method panicked"},
		{"reject of a typed nil", func() error { return wharf.Reject(typedNil) }, wharf.Rejected,
			"the handler returned a *wharf.outcomeError whose Error method panicked"},
		{"empty message", func() error { return errors.New("") }, wharf.Failed,
			"the handler returned a *errors.errorString with an empty message"},
		{"wrapped nil", func() error { return fmt.Errorf("%w", nil) }, wharf.Failed, "%!w(<nil>)"},
		{"outcome error saying handled", func() error { return wharf.OutcomeError(wharf.Handled, errors.New("x")) },
			wharf.Failed, "x"},
		{"outcome error out of range", func() error { return wharf.OutcomeError(99, errors.New("y")) },
			wharf.Failed, "y"},
		{"outcome error without error", func() error { return wharf.OutcomeError(wharf.Rejected, nil) },
			wharf.Rejected, "the handler returned a *wharf.outcomeError whose Error method panicked"},
	}
	for _, c := range cases {
		outcome, reason := wharf.RunHandler(c.handler)
		if outcome != c.outcome || !strings.HasPrefix(reason, c.reason) || (c.reason == "") != (reason == "") {
			t.Errorf("%s: outcome %d reason %q, want %d %q", c.name, outcome, reason, c.outcome, c.reason)
		}
	}
}

// Through a real runtime: a subscriber failing each of these ways on a fact's first delivery gets
// it again (nothing was taken as handled) and the process lives on.
func TestHandlerFailuresAreRetriedNotHandled(t *testing.T) {
	engine := open(t, "partitions=2")
	var typedNil *nilReceiverError
	failures := []func() error{
		func() error { panic(explosive{}) },
		func() error { panic(nil) },
		func() error { return explosiveError{} },
		func() error { return typedNil },
		func() error { return wharf.OutcomeError(wharf.Handled, errors.New("not handled")) },
	}
	for i := range failures {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=1;backoff_initial_ms=1;backoff_max_ms=2")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var mu sync.Mutex
	attempts := map[uint64]int{}
	err = rt.Subscribe("fragile", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		mu.Lock()
		attempts[f.ID]++
		first := attempts[f.ID] == 1
		mu.Unlock()
		if first {
			return failures[f.ID-1]()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	mu.Lock()
	defer mu.Unlock()
	for id := uint64(1); id <= uint64(len(failures)); id++ {
		if attempts[id] != 2 {
			t.Errorf("fact %d delivered %d times, want 2 (its first delivery failed)", id, attempts[id])
		}
	}
}

// drain drains rt, again while a subscriber waits for a retry (ErrBusy).
func drain(t *testing.T, rt *wharf.Runtime) {
	t.Helper()
	for tries := 0; ; tries++ {
		err := rt.Drain()
		if err == nil {
			return
		}
		if !errors.Is(err, wharf.ErrBusy) || tries == 1000 {
			t.Fatalf("drain: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Calls that would wait for the handler making them are refused inside it, before they take a
// lock that a Free or Close waiting for the handler would hold.
func TestCallsThatWouldDeadlockAreRefusedInHandlers(t *testing.T) {
	engine := open(t, "")
	commitOrder(t, engine, "o-1", "alice", 1)
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var inside []error
	err = rt.Subscribe("nested", []string{"OrderPlaced"}, "", func(*wharf.Fact) error {
		rt.Free() // deprecated: does nothing in a handler
		inside = append(inside, rt.Close(), rt.Drain(), rt.Stop(), rt.Start(), engine.Close(),
			rt.Subscribe("late", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil }))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- rt.Drain() }()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		// Not t.Fatal nor panic: the deferred Free and the cleanup's Close would wait for the
		// deadlocked drain forever.
		fmt.Fprintln(os.Stderr, "deadlock: a call from a handler waited for the handler")
		os.Exit(1)
	}
	if len(inside) != 6 {
		t.Fatalf("the handler ran %d calls, want 6", len(inside))
	}
	for i, err := range inside {
		if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "from a handler") {
			t.Errorf("call %d from a handler: %v, want ErrInvalidArgument", i, err)
		}
	}
	if _, err := engine.Partitions(); err != nil {
		t.Fatalf("the engine was closed from a handler: %v", err)
	}
}

// Every string argument is taken whole or refused: a NUL byte would cut it short in C.
func TestNamesWithANulByteAreRefused(t *testing.T) {
	dir := t.TempDir()
	refused := func(what string, err error) {
		t.Helper()
		var werr *wharf.Error
		if !errors.As(err, &werr) || werr.Status != wharf.StatusInvalidArgument ||
			!strings.HasPrefix(werr.Message, what+" ") || !strings.Contains(werr.Message, "NUL byte") {
			t.Errorf("%s with a NUL byte: %v, want ErrInvalidArgument naming it", what, err)
		}
	}
	_, err := wharf.Open(filepath.Join(dir, "db\x00-x"), "")
	refused("path", err)
	_, err = wharf.Open(filepath.Join(dir, "db"), "partitions=4\x00;bogus")
	refused("options", err)
	if _, statErr := os.Stat(filepath.Join(dir, "db")); !os.IsNotExist(statErr) {
		t.Errorf("a refused Open created %s: %v", filepath.Join(dir, "db"), statErr)
	}
	engine := open(t, "")
	refused("types[1]", engine.DeclareTypes("Fine", "Order\x00Evil"))
	_, err = engine.Get("orders\x00x", []byte("k"))
	refused("table", err)

	txn, err := engine.Begin()
	if err != nil {
		t.Fatal(err)
	}
	refused("table", txn.Put("accounts\x00shadow", []byte("k"), []byte("v")))
	refused("table", txn.Delete("accounts\x00shadow", []byte("k")))
	refused("fact type", txn.Emit("OrderPlaced\x00Evil", []byte("k"), []byte("p")))
	_, err = txn.Get("accounts\x00shadow", []byte("k"))
	refused("table", err)
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Get("accounts", []byte("k")); !errors.Is(err, wharf.ErrNotFound) {
		t.Errorf("a refused put wrote into table accounts: %v", err)
	}
	if lsn, _ := engine.DurableLSN(); lsn != 0 {
		t.Errorf("a refused emit emitted: durable lsn %d", lsn)
	}

	_, err = wharf.NewRuntime(engine, "workers=1\x00;bogus")
	refused("options", err)
	rt, err := wharf.NewRuntime(engine, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	handler := func(*wharf.Fact) error { return nil }
	project := func(*wharf.Fact, *wharf.Txn) error { return nil }
	refused("name", rt.Subscribe("mail\x00er", []string{"OrderPlaced"}, "", handler))
	refused("types[0]", rt.Subscribe("mailer", []string{"OrderPlaced\x00"}, "", handler))
	refused("options", rt.Subscribe("mailer", []string{"OrderPlaced"}, "consumer_id=a\x00b", handler))
	refused("name", rt.Project("tot\x00als", []string{"OrderPlaced"}, "", project))
	refused("options", rt.React("echo", []string{"OrderPlaced"}, "batch_facts=1\x00", project))
}

// A handler's effects read what the batch wrote so far (earlier facts of the batch, its own
// writes), not a failed fact's: a read-modify-write counter is exact at the default batch size.
func TestEffectsGetReadsTheBatchSoFar(t *testing.T) {
	engine := open(t, "partitions=1")
	const facts = 30
	for i := 1; i <= facts; i++ {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=0")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var ownWriteSeen []bool
	err = rt.Project("count", []string{"OrderPlaced"}, "", func(f *wharf.Fact, effects *wharf.Txn) error {
		n := 0
		if value, err := effects.Get("counts", []byte("n")); err == nil {
			n, _ = strconv.Atoi(string(value))
		} else if !errors.Is(err, wharf.ErrNotFound) {
			return err
		}
		if err := effects.Put("counts", []byte("n"), []byte(strconv.Itoa(n+1))); err != nil {
			return err
		}
		value, err := effects.Get("counts", []byte("n"))
		ownWriteSeen = append(ownWriteSeen, err == nil && string(value) == strconv.Itoa(n+1))
		if f.ID == 7 {
			return errors.New("fact 7 fails after writing") // its +1 is discarded
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(); err != nil {
		t.Fatal(err)
	}
	if value, err := engine.Get("counts", []byte("n")); err != nil || string(value) != strconv.Itoa(facts-1) {
		t.Fatalf("counter %q %v, want %d (every fact but the failed one, once)", value, err, facts-1)
	}
	for i, seen := range ownWriteSeen {
		if !seen {
			t.Fatalf("handler call %d did not read its own write", i+1)
		}
	}
}

// The child process of TestGoexitInAHandlerEndsTheProcess: a subscriber's handler calls
// t.FailNow (runtime.Goexit) on fact 2 of 3.
func TestGoexitHelperProcess(t *testing.T) {
	dir := os.Getenv("WHARF_GOEXIT_DB")
	if dir == "" {
		t.Skip("the child process of TestGoexitInAHandlerEndsTheProcess")
	}
	engine, err := wharf.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Subscribe("mailer", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		if f.ID == 2 {
			t.FailNow()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rt.Drain()
	fmt.Println("the process lived on after a handler called runtime.Goexit")
	os.Exit(0) // not 2, whatever the test framework would make of the failure
}

// runtime.Goexit in a handler (t.FailNow here) cannot cross the C library: the process ends with
// status 2 and a line saying why, and the fact is delivered again after a restart.
func TestGoexitInAHandlerEndsTheProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	child := exec.Command(os.Args[0], "-test.run=^TestGoexitHelperProcess$", "-test.count=1")
	child.Env = append(os.Environ(), "WHARF_GOEXIT_DB="+dir)
	var stderr strings.Builder
	child.Stderr = &stderr
	out, err := child.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("the child ended with %v, want exit status 2\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	want := "wharf: a handler called runtime.Goexit (t.Fatal, t.FailNow, t.SkipNow?), which cannot " +
		"cross the C library; the fact is not handled and will be delivered again; exiting\n"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("the child's stderr lacks %q:\n%s", want, stderr.String())
	}

	engine, err := wharf.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var delivered []uint64
	err = rt.Subscribe("mailer", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		delivered = append(delivered, f.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	if len(delivered) == 0 || delivered[0] > 2 || delivered[len(delivered)-1] != 3 {
		t.Fatalf("after the restart the subscriber got facts %v, want 2 (not handled) through 3", delivered)
	}
}

// The cost of a delivery to an empty Go subscriber (not run by the tests: go test -run=^$
// -bench=EmptySubscriber -benchtime=20000x).
func BenchmarkEmptySubscriber(b *testing.B) {
	// Buffered commits and large batches: the cursor's writes do not hide the handler calls.
	engine, err := wharf.Open(filepath.Join(b.TempDir(), "db"), "durability=buffered")
	if err != nil {
		b.Fatal(err)
	}
	defer engine.Close()
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		b.Fatal(err)
	}
	for done := 0; done < b.N; {
		txn, err := engine.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 1000 && done < b.N; i, done = i+1, done+1 {
			if err := txn.Emit("OrderPlaced", []byte("alice"), []byte("o")); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	var delivered int
	err = rt.Subscribe("empty", []string{"OrderPlaced"}, "batch_facts=1000", func(*wharf.Fact) error {
		delivered++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := rt.Drain(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if delivered != b.N {
		b.Fatalf("delivered %d facts, want %d", delivered, b.N)
	}
}
