package wharf_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	wharf "github.com/wharf/wharf/api/go"
)

// openAt opens the database in path (closed at the end of the test).
func openAt(t *testing.T, path string) *wharf.Engine {
	t.Helper()
	engine, err := wharf.Open(path, "partitions=2")
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { engine.Close() })
	return engine
}

// putRows commits rows key → value of table "acct", in one transaction.
func putRows(t *testing.T, engine *wharf.Engine, rows ...string) {
	t.Helper()
	txn, err := engine.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(rows); i += 2 {
		if err := txn.Put("acct", []byte(rows[i]), []byte(rows[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// putNumbered commits rows k0..k(n-1) = r0..r(n-1) of table "acct".
func putNumbered(t *testing.T, engine *wharf.Engine, n int) {
	t.Helper()
	var rows []string
	for i := 0; i < n; i++ {
		rows = append(rows, fmt.Sprintf("k%d", i), fmt.Sprintf("r%d", i))
	}
	putRows(t, engine, rows...)
}

// steps declares "acct" at version top and registers the migrations 1→2 ... (top-1)→top, each
// appending "|vN" to the row; calls counts their calls.
type steps struct {
	mu    sync.Mutex
	calls int
}

func (s *steps) declare(t *testing.T, engine *wharf.Engine, top uint32) {
	t.Helper()
	if err := engine.DeclareTable("acct", top); err != nil {
		t.Fatalf("declare acct at %d: %v", top, err)
	}
	for from := uint32(1); from < top; from++ {
		mark := fmt.Sprintf("|v%d", from+1)
		err := engine.RegisterMigration("acct", from, func(row []byte) ([]byte, error) {
			s.mu.Lock()
			s.calls++
			s.mu.Unlock()
			return append(row, mark...), nil
		})
		if err != nil {
			t.Fatalf("register %d: %v", from, err)
		}
	}
}

func (s *steps) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func get(t *testing.T, engine *wharf.Engine, key string) string {
	t.Helper()
	value, err := engine.Get("acct", []byte(key))
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(value)
}

func migrate(t *testing.T, engine *wharf.Engine, opts wharf.MigrateOptions) wharf.MigrateReport {
	t.Helper()
	report, err := engine.MigrateTable("acct", opts)
	if err != nil {
		t.Fatalf("migrate %+v: %v", opts, err)
	}
	return report
}

// A chain 1→2→3 on rows written before the table was declared: Get and Scan lift them without
// writing, a transaction that reads them writes them back, MigrateTable writes the rest, and a
// second MigrateTable migrates nothing.
func TestMigrationChainLiftsRowsAndWritesThemBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	engine := openAt(t, path)
	putNumbered(t, engine, 10)
	if v, err := engine.TableVersion("acct"); err != nil || v != 1 {
		t.Fatalf("version of a table never declared: %d %v, want 1", v, err)
	}
	cells := wharf.LiveCells()
	var s steps
	s.declare(t, engine, 3)
	if err := engine.DeclareTable("acct", 3); err != nil {
		t.Fatalf("declaring the version it has: %v", err)
	}
	if v, err := engine.TableVersion("acct"); err != nil || v != 3 {
		t.Fatalf("declared version: %d %v, want 3", v, err)
	}
	if got := get(t, engine, "k0"); got != "r0|v2|v3" {
		t.Fatalf("get k0: %q, want it lifted to r0|v2|v3", got)
	}
	var scanned []string
	if _, err := engine.Scan("acct", wharf.ScanOptions{Limit: 2}, func(key, value []byte) bool {
		scanned = append(scanned, string(key)+"="+string(value))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(scanned, " "); got != "k0=r0|v2|v3 k1=r1|v2|v3" {
		t.Fatalf("scan: %s", got)
	}

	// A transaction reads rows lifted and writes them back in its own commit.
	txn, _ := engine.Begin()
	if value, err := txn.Get("acct", []byte("k2")); err != nil || string(value) != "r2|v2|v3" {
		t.Fatalf("txn get k2: %q %v", value, err)
	}
	scanned = nil
	if _, err := txn.Scan("acct", wharf.ScanOptions{From: []byte("k3"), To: []byte("k5"), Limit: 10},
		func(key, value []byte) bool {
			scanned = append(scanned, string(key)+"="+string(value))
			return true
		}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(scanned, " "); got != "k3=r3|v2|v3 k4=r4|v2|v3" {
		t.Fatalf("txn scan: %s", got)
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	want := wharf.MigrateReport{Version: 3, Rows: 10, Migrated: 7, Batches: 1, Done: true}
	if got := migrate(t, engine, wharf.MigrateOptions{DryRun: true}); got != want {
		t.Fatalf("dry run after the transaction: %+v, want %+v", got, want)
	}
	if got := migrate(t, engine, wharf.MigrateOptions{}); got != want {
		t.Fatalf("migrate: %+v, want %+v", got, want)
	}
	before := s.count()
	if got := migrate(t, engine, wharf.MigrateOptions{}); got.Migrated != 0 || !got.Done {
		t.Fatalf("second migrate: %+v, want nothing migrated", got)
	}
	if got := get(t, engine, "k9"); got != "r9|v2|v3" || s.count() != before {
		t.Fatalf("get k9 after the migration: %q with %d migration calls, want none",
			got, s.count()-before)
	}
	if now := wharf.LiveCells(); now != cells+2 {
		t.Errorf("%d migrations held, want 2", now-cells)
	}
	// The rows are stored at version 3: read back without any migration.
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("Close left %d migrations unreleased", now-cells)
	}
	engine = openAt(t, path)
	if v, err := engine.TableVersion("acct"); err != nil || v != 3 {
		t.Fatalf("declared version after a reopen: %d %v, want 3", v, err)
	}
	for i := 0; i < 10; i++ {
		if got, want := get(t, engine, fmt.Sprintf("k%d", i)), fmt.Sprintf("r%d|v2|v3", i); got != want {
			t.Fatalf("after a reopen: %q, want %q", got, want)
		}
	}
}

// MigrateTable in batches calls Progress after every batch but the last; false stops it, and so
// does a panic, which MigrateTable raises again; the batches before stay migrated.
func TestMigrateTableBatchesAndProgress(t *testing.T) {
	engine := open(t, "")
	putNumbered(t, engine, 10)
	var s steps
	s.declare(t, engine, 2)
	var reports []wharf.MigrateReport
	got := migrate(t, engine, wharf.MigrateOptions{BatchRows: 3, RowsPerSecond: 1e9,
		Progress: func(r wharf.MigrateReport) bool { reports = append(reports, r); return true }})
	if want := (wharf.MigrateReport{Version: 2, Rows: 10, Migrated: 10, Batches: 4, Done: true}); got != want {
		t.Fatalf("migrate: %+v, want %+v", got, want)
	}
	if len(reports) != 3 {
		t.Fatalf("progress called %d times, want 3 (every batch but the last): %+v", len(reports), reports)
	}
	for i, r := range reports {
		n := uint64(i + 1)
		if want := (wharf.MigrateReport{Version: 2, Rows: 3 * n, Migrated: 3 * n, Batches: n}); r != want {
			t.Errorf("progress %d: %+v, want %+v", i, r, want)
		}
	}

	// false stops after the first batch, which stays migrated.
	engine2 := open(t, "")
	putNumbered(t, engine2, 10)
	s.declare(t, engine2, 2)
	calls := 0
	got, err := engine2.MigrateTable("acct", wharf.MigrateOptions{BatchRows: 3,
		Progress: func(wharf.MigrateReport) bool { calls++; return false }})
	if want := (wharf.MigrateReport{Version: 2, Rows: 3, Migrated: 3, Batches: 1}); err != nil ||
		got != want || calls != 1 {
		t.Fatalf("stopped migrate: %+v %v after %d calls, want %+v after 1", got, err, calls, want)
	}
	if left := migrate(t, engine2, wharf.MigrateOptions{DryRun: true}).Migrated; left != 7 {
		t.Fatalf("%d rows left to migrate, want 7", left)
	}

	// A panic stops it at once and is raised again from MigrateTable.
	cells := wharf.LiveCells()
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		calls = 0
		migrate(t, engine2, wharf.MigrateOptions{BatchRows: 2, Progress: func(wharf.MigrateReport) bool {
			calls++
			if calls == 2 {
				panic("progress bug")
			}
			return true
		}})
		t.Error("MigrateTable returned although its progress panicked")
	}()
	if recovered != "progress bug" || calls != 2 {
		t.Fatalf("recovered %v after %d progress calls, want the panic after 2", recovered, calls)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("a panicking progress left %d cells unreleased", now-cells)
	}
	// It started again from the first row: its two batches (k0-k1, k2-k3) migrated k3 only.
	if left := migrate(t, engine2, wharf.MigrateOptions{DryRun: true}).Migrated; left != 6 {
		t.Fatalf("%d rows left to migrate, want 6", left)
	}
	if got := migrate(t, engine2, wharf.MigrateOptions{BatchRows: 100000}); got.Migrated != 6 || !got.Done {
		t.Fatalf("migrating the rest: %+v", got)
	}
}

// A dry run lifts every row in memory and commits nothing.
func TestMigrateTableDryRunChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	engine := openAt(t, path)
	putNumbered(t, engine, 10)
	var s steps
	s.declare(t, engine, 3)
	progress := 0
	for i := 0; i < 2; i++ {
		got := migrate(t, engine, wharf.MigrateOptions{BatchRows: 4, DryRun: true,
			Progress: func(wharf.MigrateReport) bool { progress++; return true }})
		if want := (wharf.MigrateReport{Version: 3, Rows: 10, Migrated: 10, Batches: 3, Done: true}); got != want {
			t.Fatalf("dry run %d: %+v, want %+v", i, got, want)
		}
	}
	if progress != 4 || s.count() != 2*2*10 {
		t.Fatalf("%d progress calls and %d migration calls, want 4 and 40", progress, s.count())
	}
	// Without the migrations the rows cannot be read: they are still at version 1.
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	engine = openAt(t, path)
	_, err := engine.Get("acct", []byte("k0"))
	if !errors.Is(err, wharf.ErrNotSupported) ||
		!strings.Contains(err.Error(), "migrating the row from version 1 to 2: no migration is registered") {
		t.Fatalf("get of a row at version 1 without migrations: %v", err)
	}
}

// A migration that refuses a row in any way (an error, a panic, an error whose text cannot be
// read) fails its read with ErrNotSupported naming the table, the key, the step and the reason;
// nothing is written, and MigrateTable stops there.
func TestRefusingMigrationFailsTheRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	engine := openAt(t, path)
	putRows(t, engine, "a", "a", "error", "error", "panic", "panic", "explosive", "explosive",
		"empty", "empty", "z", "z")
	if err := engine.DeclareTable("acct", 2); err != nil {
		t.Fatal(err)
	}
	err := engine.RegisterMigration("acct", 1, func(row []byte) ([]byte, error) {
		switch string(row) {
		case "error":
			return nil, errors.New("field cents is missing")
		case "panic":
			panic("migration bug")
		case "explosive":
			return nil, explosiveError{}
		case "empty":
			return []byte("ignored"), errors.New("")
		}
		return append(row, "|v2"...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, engine, "a"); got != "a|v2" {
		t.Fatalf("get a: %q", got)
	}
	step := ": migrating the row from version 1 to 2: "
	wants := []struct{ key, reason string }{
		{"error", "field cents is missing"},
		{"panic", "the migration panicked: migration bug"},
		{"explosive", "the migration returned a wharf_test.explosiveError whose Error method panicked"},
		{"empty", "the migration returned a *errors.errorString with an empty message"},
	}
	for _, want := range wants {
		text := "table 'acct', key '" + want.key + "'" + step + want.reason
		_, err := engine.Get("acct", []byte(want.key))
		if !errors.Is(err, wharf.ErrNotSupported) || !strings.Contains(err.Error(), text) {
			t.Errorf("get %s: %v, want ErrNotSupported with %q", want.key, err, text)
		}
		txn, _ := engine.Begin()
		_, err = txn.Get("acct", []byte(want.key))
		txn.Abort()
		if !errors.Is(err, wharf.ErrNotSupported) || !strings.Contains(err.Error(), step+want.reason) {
			t.Errorf("txn get %s: %v, want ErrNotSupported with %q", want.key, err, want.reason)
		}
	}
	// Key order: a, empty, error, ...; batches of one, so "a" is committed before "empty" fails.
	report, err := engine.MigrateTable("acct", wharf.MigrateOptions{BatchRows: 1})
	if !errors.Is(err, wharf.ErrNotSupported) ||
		!strings.Contains(err.Error(), "key 'empty'"+step+wants[3].reason) || report.Done ||
		report.Migrated != 1 {
		t.Fatalf("migrate: %+v %v, want ErrNotSupported at key 'empty' after migrating one row",
			report, err)
	}
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	engine = openAt(t, path)
	if got := get(t, engine, "a"); got != "a|v2" {
		t.Fatalf("get a after a reopen: %q, want it migrated", got)
	}
	if _, err := engine.Get("acct", []byte("z")); !errors.Is(err, wharf.ErrNotSupported) {
		t.Fatalf("get z after a reopen: %v, want it still at version 1", err)
	}
}

// Bad input is refused, named, and releases what it was handed.
func TestTablesBadInput(t *testing.T) {
	engine := open(t, "")
	invalid := func(what string, err error, mentions string) {
		t.Helper()
		if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), mentions) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", what, err, mentions)
		}
	}
	lift := func(row []byte) ([]byte, error) { return row, nil }
	cells := wharf.LiveCells()
	invalid("version 0", engine.DeclareTable("acct", 0), "version 0")
	invalid("a NUL in the name", engine.DeclareTable("ac\x00ct", 2), "NUL")
	invalid("an empty name", engine.DeclareTable("", 2), "table")
	if _, err := engine.TableVersion("ac\x00ct"); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Errorf("version of a name holding a NUL: %v", err)
	}
	invalid("a table at version 1", engine.RegisterMigration("acct", 1, lift), "at version 1")
	if err := engine.DeclareTable("acct", 3); err != nil {
		t.Fatal(err)
	}
	invalid("a version going back", engine.DeclareTable("acct", 2), "never goes back")
	invalid("from version 0", engine.RegisterMigration("acct", 0, lift), "declared at version 3")
	invalid("from the declared version", engine.RegisterMigration("acct", 3, lift),
		"declared at version 3")
	invalid("a nil migration", engine.RegisterMigration("acct", 1, nil), "nil")
	invalid("a NUL in the table", engine.RegisterMigration("acct\x00", 1, lift), "NUL")
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("failed registrations left %d migrations unreleased", now-cells)
	}
	if err := engine.RegisterMigration("acct", 1, lift); err != nil {
		t.Fatal(err)
	}
	invalid("the same step twice", engine.RegisterMigration("acct", 1, lift), "already registered")
	if now := wharf.LiveCells(); now != cells+1 {
		t.Errorf("%d migrations held after one registration, want 1", now-cells)
	}
	progress := func(wharf.MigrateReport) bool { return true }
	for _, rows := range []int{-1, wharf.MigrateBatchRowsMax + 1} {
		_, err := engine.MigrateTable("acct", wharf.MigrateOptions{BatchRows: rows, Progress: progress})
		invalid(fmt.Sprintf("BatchRows %d", rows), err, fmt.Sprintf("BatchRows %d", rows))
	}
	_, err := engine.MigrateTable("ac\x00ct", wharf.MigrateOptions{Progress: progress})
	invalid("a NUL in the table", err, "NUL")
	if now := wharf.LiveCells(); now != cells+1 {
		t.Errorf("refused MigrateTable calls left %d cells unreleased", now-cells-1)
	}
	if v, err := engine.TableVersion("acct"); err != nil || v != 3 {
		t.Errorf("declared version after the refusals: %d %v, want 3", v, err)
	}

	// From a handler (it would wait for the handler's own commit) and from a migration.
	runtime := newRuntime(t, engine)
	var mu sync.Mutex // the handler runs on a worker thread
	var refused []error
	err = runtime.Subscribe("migrator", []string{"OrderPlaced"}, "", func(*wharf.Fact) error {
		_, err := engine.MigrateTable("acct", wharf.MigrateOptions{})
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	commitOrder(t, engine, "o-1", "alice", 100)
	if err := runtime.Drain(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(refused) != 1 {
		t.Fatalf("handler ran %d times, want 1", len(refused))
	}
	invalid("MigrateTable from a handler", refused[0], "Engine.MigrateTable")
	mu.Unlock()
	runtime.Close()

	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("Close left %d migrations unreleased", now-cells)
	}
	if err := engine.DeclareTable("acct", 4); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("declare after Close: %v", err)
	}
	if _, err := engine.TableVersion("acct"); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("version after Close: %v", err)
	}
	if err := engine.RegisterMigration("acct", 2, lift); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("register after Close: %v", err)
	}
	if _, err := engine.MigrateTable("acct", wharf.MigrateOptions{Progress: progress}); !errors.Is(
		err, wharf.ErrClosed) {
		t.Errorf("migrate after Close: %v", err)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("calls after Close left %d cells unreleased", now-cells)
	}
}
