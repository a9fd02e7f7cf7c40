package wharf_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	wharf "github.com/wharf/wharf/api/go"
)

// increment reads counter key of table "counters", writes it plus one and emits a fact carrying
// the new value: the read-modify-write of issue 32.
func increment(txn *wharf.Txn, key string) error {
	n := 0
	value, err := txn.Get("counters", []byte(key))
	switch {
	case err == nil:
		if n, err = strconv.Atoi(string(value)); err != nil {
			return err
		}
	case !errors.Is(err, wharf.ErrNotFound):
		return err
	}
	next := []byte(strconv.Itoa(n + 1))
	if err := txn.Put("counters", []byte(key), next); err != nil {
		return err
	}
	return txn.Emit("OrderPlaced", []byte(key), next)
}

// Goroutines incrementing one counter through Transact lose no update: the counter ends exact and
// every value from 1 to the total was emitted exactly once (each fact describes a state that
// stood).
func TestTransactLosesNoUpdate(t *testing.T) {
	engine := open(t, "partitions=1")
	const goroutines, increments = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*increments)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < increments; i++ {
				// Enough attempts that 4 contenders always get through.
				_, err := engine.Transact(func(txn *wharf.Txn) error { return increment(txn, "c") },
					wharf.TransactOptions{AttemptsMax: 1000})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("transact: %v", err)
		}
	}
	value, err := engine.Get("counters", []byte("c"))
	if err != nil || string(value) != strconv.Itoa(goroutines*increments) {
		t.Fatalf("counter %q (%v), want %d", value, err, goroutines*increments)
	}
	facts, err := engine.ReadFacts(0, 0, goroutines*increments+10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, fact := range facts {
		seen[string(fact.Payload)]++
	}
	for v := 1; v <= goroutines*increments; v++ {
		if seen[strconv.Itoa(v)] != 1 {
			t.Fatalf("value %d emitted %d times, want once (%d facts)", v, seen[strconv.Itoa(v)], len(facts))
		}
	}
	if len(facts) != goroutines*increments {
		t.Fatalf("%d facts, want %d", len(facts), goroutines*increments)
	}
}

// Without Transact a commit whose read changed is refused with ErrReadConflict (also ErrConflict,
// subcode SubcodeReadConflict), and writes nothing; Transact retries it, up to AttemptsMax.
func TestReadConflictIsRefusedAndRetried(t *testing.T) {
	engine := open(t, "")
	first, _ := engine.Begin()
	second, _ := engine.Begin()
	for _, txn := range []*wharf.Txn{first, second} {
		if err := increment(txn, "c"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	_, err := second.Commit()
	var we *wharf.Error
	if !errors.Is(err, wharf.ErrReadConflict) || !errors.Is(err, wharf.ErrConflict) ||
		!errors.As(err, &we) || we.Subcode != wharf.SubcodeReadConflict {
		t.Fatalf("second commit: %v, want ErrReadConflict", err)
	}
	if wharf.SubcodeReadConflict != 6 || wharf.SubcodeTimedOut != 5 {
		t.Fatalf("subcodes renumbered: %d %d", wharf.SubcodeReadConflict, wharf.SubcodeTimedOut)
	}
	if errors.Is(&wharf.Error{Status: wharf.StatusConflict, Subcode: wharf.SubcodeCursorMoved},
		wharf.ErrReadConflict) {
		t.Fatal("a cursor conflict matched ErrReadConflict")
	}
	if value, _ := engine.Get("counters", []byte("c")); string(value) != "1" {
		t.Fatalf("counter %q after the refused commit, want 1", value)
	}

	// Every attempt conflicts (another commit changes the key between fn's read and its commit):
	// Transact gives up after AttemptsMax attempts with that conflict.
	attempts := 0
	_, err = engine.Transact(func(txn *wharf.Txn) error {
		attempts++
		if err := increment(txn, "c"); err != nil {
			return err
		}
		_, err := engine.Transact(func(other *wharf.Txn) error { return increment(other, "c") })
		return err
	}, wharf.TransactOptions{AttemptsMax: 3, BackoffMaxMs: 1})
	if !errors.Is(err, wharf.ErrReadConflict) || attempts != 3 {
		t.Fatalf("transact: %v after %d attempts, want ErrReadConflict after 3", err, attempts)
	}
	if value, _ := engine.Get("counters", []byte("c")); string(value) != "4" {
		t.Fatalf("counter %q, want 4 (only the inner transactions committed)", value)
	}
}

// fn's error is returned unchanged and nothing of the attempt commits; a panic in fn aborts the
// transaction and goes on up; a function that commits its own transaction is refused; bad
// options and a nil fn are refused.
func TestTransactNeverTakesAFailureForSuccess(t *testing.T) {
	engine := open(t, "")
	mine := errors.New("not today")
	calls := 0
	_, err := engine.Transact(func(txn *wharf.Txn) error {
		calls++
		if err := txn.Put("t", []byte("k"), []byte("v")); err != nil {
			return err
		}
		return mine
	})
	if err != mine || calls != 1 {
		t.Fatalf("transact: %v after %d calls, want the function's own error after 1", err, calls)
	}
	// Even a read conflict fn returns is its own error: not retried.
	conflict := &wharf.Error{Status: wharf.StatusConflict, Subcode: wharf.SubcodeReadConflict}
	calls = 0
	_, err = engine.Transact(func(*wharf.Txn) error { calls++; return conflict })
	if err != conflict || calls != 1 {
		t.Fatalf("transact: %v after %d calls, want fn's conflict after 1", err, calls)
	}

	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the function's panic", p)
			}
		}()
		engine.Transact(func(txn *wharf.Txn) error {
			txn.Put("t", []byte("k"), []byte("v"))
			panic("boom")
		})
		t.Fatal("Transact returned after its function panicked")
	}()
	if _, err := engine.Get("t", []byte("k")); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("get after a failed and a panicking function: %v, want ErrNotFound", err)
	}

	_, err = engine.Transact(func(txn *wharf.Txn) error {
		txn.Put("t", []byte("own"), []byte("v"))
		_, err := txn.Commit()
		return err
	})
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "committed") {
		t.Fatalf("transact with a function that commits: %v, want ErrInvalidArgument", err)
	}
	if _, err := engine.Transact(nil); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("transact(nil): %v", err)
	}
	for _, bad := range []wharf.TransactOptions{{AttemptsMax: -1}, {BackoffMinMs: 200}} {
		_, err = engine.Transact(func(*wharf.Txn) error { return nil }, bad)
		if !errors.Is(err, wharf.ErrInvalidArgument) {
			t.Fatalf("options %+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	id, err := engine.Transact(func(txn *wharf.Txn) error {
		return txn.Emit("OrderPlaced", []byte("k"), []byte("p"))
	})
	if err != nil || id == 0 {
		t.Fatalf("transact emitting a fact: id %d, %v", id, err)
	}
}

// Scans walk a table in key order, page by page through ResumeFrom without losing or repeating a
// row, within a prefix and a range; a transaction's scan sees its own writes.
func TestScanPaging(t *testing.T) {
	engine := open(t, "")
	txn, _ := engine.Begin()
	for i := 0; i < 25; i++ {
		txn.Put("rows", []byte(fmt.Sprintf("r%02d", i)), []byte(strconv.Itoa(i)))
	}
	txn.Put("rows", []byte{0, 0xff}, []byte{0})
	txn.Put("rows", []byte("s"), []byte("after"))
	txn.Put("other", []byte("r00"), []byte("elsewhere"))
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	opts := wharf.ScanOptions{Prefix: []byte("r"), Limit: 10}
	for pages := 1; ; pages++ {
		result, err := engine.Scan("rows", opts, func(key, value []byte) bool {
			keys = append(keys, string(key)+"="+string(value))
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if !result.More {
			if pages != 3 || result.Rows != 5 {
				t.Fatalf("last page %d with %d rows, want page 3 with 5", pages, result.Rows)
			}
			break
		}
		if result.Rows != 10 || !bytes.Equal(result.ResumeFrom, []byte(keys[len(keys)-1][:3]+"\x00")) {
			t.Fatalf("page %d: %+v", pages, result)
		}
		opts.From = result.ResumeFrom
	}
	if len(keys) != 25 || keys[0] != "r00=0" || keys[24] != "r24=24" {
		t.Fatalf("scanned %d rows: %v", len(keys), keys)
	}

	// fn stops the scan: the row it stopped at was visited; the rest follows from ResumeFrom.
	var got [][]byte
	result, err := engine.Scan("rows", wharf.ScanOptions{Limit: 100}, func(key, _ []byte) bool {
		got = append(got, key)
		return len(got) < 2
	})
	if err != nil || !result.More || result.Rows != 2 || !bytes.Equal(got[0], []byte{0, 0xff}) ||
		!bytes.Equal(result.ResumeFrom, []byte("r00\x00")) {
		t.Fatalf("stopped scan: %+v %q %v", result, got, err)
	}
	got = nil
	result, err = engine.Scan("rows", wharf.ScanOptions{From: []byte("r23"), To: []byte("s"), Limit: 100},
		func(key, _ []byte) bool { got = append(got, key); return true })
	if err != nil || result.More || len(got) != 2 || string(got[1]) != "r24" {
		t.Fatalf("range scan: %+v %q %v", result, got, err)
	}

	// In a transaction: its own writes and deletes overlay the snapshot.
	txn, _ = engine.Begin()
	defer txn.Abort()
	txn.Put("rows", []byte("r005"), []byte("mine"))
	txn.Delete("rows", []byte("r01"))
	got = nil
	if _, err := txn.Scan("rows", wharf.ScanOptions{Prefix: []byte("r0"), Limit: 4},
		func(key, _ []byte) bool { got = append(got, key); return true }); err != nil {
		t.Fatal(err)
	}
	if want := "r00 r005 r02 r03"; string(bytes.Join(got, []byte(" "))) != want {
		t.Fatalf("txn scan: %q, want %s", got, want)
	}
}

// Bad scans are refused by name; a panic in fn ends the scan and comes out of Scan; an unknown
// table has no rows.
func TestScanBadInput(t *testing.T) {
	engine := open(t, "")
	txn, _ := engine.Begin()
	txn.Put("t", []byte("a"), []byte("1"))
	txn.Put("t", []byte("b"), []byte("2"))
	txn.Commit()
	visit := func(key, value []byte) bool { return true }
	for name, c := range map[string]struct {
		table string
		opts  wharf.ScanOptions
		fn    func(key, value []byte) bool
		what  string
	}{
		"limit 0":        {"t", wharf.ScanOptions{}, visit, "limit"},
		"limit negative": {"t", wharf.ScanOptions{Limit: -1}, visit, "limit"},
		"limit huge":     {"t", wharf.ScanOptions{Limit: wharf.ScanLimitMax + 1}, visit, "limit"},
		"reversed":       {"t", wharf.ScanOptions{From: []byte("b"), To: []byte("a"), Limit: 1}, visit, ""},
		"empty range":    {"t", wharf.ScanOptions{From: []byte("a"), To: []byte("a"), Limit: 1}, visit, ""},
		"NUL in table":   {"t\x00x", wharf.ScanOptions{Limit: 1}, visit, "NUL"},
		"not UTF-8":      {"t\xff", wharf.ScanOptions{Limit: 1}, visit, ""},
		"empty table":    {"", wharf.ScanOptions{Limit: 1}, visit, ""},
		"nil fn":         {"t", wharf.ScanOptions{Limit: 1}, nil, "nil"},
	} {
		_, err := engine.Scan(c.table, c.opts, c.fn)
		if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("%s: %v, want ErrInvalidArgument naming %q", name, err, c.what)
		}
	}
	rows := 0
	if result, err := engine.Scan("unknown", wharf.ScanOptions{Limit: 5},
		func(key, value []byte) bool { rows++; return true }); err != nil || rows != 0 || result.Rows != 0 {
		t.Fatalf("unknown table: %+v %v, %d rows", result, err, rows)
	}

	calls := 0
	func() {
		defer func() {
			if p := recover(); p != "row panic" {
				t.Fatalf("recovered %v, want the row function's panic", p)
			}
		}()
		engine.Scan("t", wharf.ScanOptions{Limit: 5}, func(key, value []byte) bool {
			calls++
			panic("row panic")
		})
	}()
	if calls != 1 {
		t.Fatalf("the row function ran %d times after panicking, want 1", calls)
	}
	// The engine is still fine after it.
	if value, err := engine.Get("t", []byte("b")); err != nil || string(value) != "2" {
		t.Fatalf("get after a panicking scan: %q %v", value, err)
	}

	txn, _ = engine.Begin()
	txn.Commit()
	if _, err := txn.Scan("t", wharf.ScanOptions{Limit: 1}, visit); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("scan of an ended transaction: %v", err)
	}
}

// A projection scans its effects (the batch so far overlaid on committed state) to keep a running
// total exact; a transaction's own scan function may read it but not change or end it.
func TestScanOfEffectsAndWithinItsOwnScan(t *testing.T) {
	engine := open(t, "partitions=2")
	want := map[string]int{}
	for i := 1; i <= 8; i++ {
		customer := fmt.Sprintf("c-%d", i%2)
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), customer, i*10)
		want[customer] += i * 10
	}
	runtime, err := wharf.NewRuntime(engine, "workers=2")
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.Close()
	err = runtime.Project("totals", []string{"OrderPlaced"}, "batch_facts=3",
		func(f *wharf.Fact, effects *wharf.Txn) error {
			id, cents, _ := strings.Cut(string(f.Payload), ":")
			prefix := string(f.Key) + "/"
			if err := effects.Put("orders", []byte(prefix+id), []byte(cents)); err != nil {
				return err
			}
			sum := 0
			_, err := effects.Scan("orders", wharf.ScanOptions{Prefix: []byte(prefix), Limit: 100},
				func(_, value []byte) bool {
					n, _ := strconv.Atoi(string(value))
					sum += n
					return true
				})
			if err != nil {
				return err
			}
			return effects.Put("totals", f.Key, []byte(strconv.Itoa(sum)))
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Drain(); err != nil {
		t.Fatal(err)
	}
	for customer, total := range want {
		if value, err := engine.Get("totals", []byte(customer)); err != nil || string(value) != strconv.Itoa(total) {
			t.Fatalf("total of %s: %q %v, want %d", customer, value, err, total)
		}
	}

	txn, _ := engine.Begin()
	var inside []error
	_, err = txn.Scan("orders", wharf.ScanOptions{Limit: 1}, func(key, _ []byte) bool {
		_, getErr := txn.Get("orders", key)
		inside = append(inside, getErr, txn.Put("orders", key, []byte("0")))
		_, commitErr := txn.Commit()
		inside = append(inside, commitErr)
		txn.Abort()
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside[0] != nil || !errors.Is(inside[1], wharf.ErrInvalidArgument) ||
		!errors.Is(inside[2], wharf.ErrInvalidArgument) {
		t.Fatalf("get, put, commit from the txn's own scan: %v", inside)
	}
	if err := txn.Put("orders", []byte("c-0/o-9"), []byte("1")); err != nil {
		t.Fatalf("put after the scan: %v", err)
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatalf("commit after the scan: %v", err)
	}
}
