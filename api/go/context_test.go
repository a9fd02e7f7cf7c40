package wharf_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	wharf "github.com/wharf/wharf/api/go"
)

// A commit whose context has ended writes nothing; a live context commits as Commit does.
func TestCommitContext(t *testing.T) {
	engine := open(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	txn, _ := engine.Begin()
	txn.Put("orders", []byte("o-1"), []byte("1"))
	cancel()
	if _, err := txn.CommitContext(ctx); err != context.Canceled {
		t.Fatalf("commit with a cancelled context: %v", err)
	}
	if _, err := txn.Commit(); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("the transaction did not end: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	txn, _ = engine.Begin()
	txn.Emit("OrderPlaced", []byte("alice"), []byte("o-2"))
	if id, err := txn.CommitContext(ctx); err != nil || id != 1 {
		t.Fatalf("commit with a live context: %d %v", id, err)
	}
	// Read after a later commit is durable: a cancelled commit handed over anyway would be too.
	if _, err := engine.Get("orders", []byte("o-1")); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("a commit cancelled before the call wrote: %v", err)
	}
	if _, err := engine.TransactContext(ctx, func(txn *wharf.Txn) error {
		return txn.Put("orders", []byte("o-3"), []byte("3"))
	}); err != nil {
		t.Fatal(err)
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	ran := false
	if _, err := engine.TransactContext(cancelled, func(*wharf.Txn) error {
		ran = true
		return nil
	}); err != context.Canceled || ran {
		t.Fatalf("transact with a cancelled context: %v (fn ran: %v)", err, ran)
	}
}

// DrainContext returns at its deadline while a handler holds the drain up; the drain goes on and
// delivers everything once the handler lets go, and Close waits for it.
func TestDrainContextReturnsAtItsDeadline(t *testing.T) {
	engine := open(t, "partitions=1")
	last := commitOrder(t, engine, "o-1", "alice", 1)
	last = commitOrder(t, engine, "o-2", "alice", 2)
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	err = rt.Subscribe("slow", []string{"OrderPlaced"}, "", func(*wharf.Fact) error {
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := rt.DrainContext(ctx); err != context.DeadlineExceeded {
		t.Fatalf("DrainContext: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(began); waited > 10*time.Second {
		t.Fatalf("DrainContext returned %v after its deadline", waited)
	}
	close(release)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if at, err := engine.Cursor("slow", 0); err != nil || at != last {
		t.Fatalf("after the background drain: cursor %d %v, want %d", at, err, last)
	}
}

// A backup, a restore and a table migration whose context ends stop at their next progress
// report and return ctx.Err(); the migration goes on from there later.
func TestBlockingAdminCallsStopWithTheirContext(t *testing.T) {
	engine := open(t, "")
	// 12 MiB that compression cannot shrink: the backup's files stay large enough for several
	// progress reports of the restore too (12 MiB of one byte compressed to less than one).
	random := rand.New(rand.NewSource(1))
	for i := 0; i < 12; i++ {
		big := make([]byte, 1<<20)
		random.Read(big)
		txn, _ := engine.Begin()
		txn.Put("blobs", []byte(fmt.Sprint(i)), big)
		if _, err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	target := filepath.Join(t.TempDir(), "backup")
	_, err := engine.BackupContext(ctx, target, wharf.BackupOptions{
		Progress: func(copied, total uint64) error {
			cancel() // the next report stops the copy
			return nil
		}})
	if err != context.Canceled {
		t.Fatalf("BackupContext cancelled during the copy: %v", err)
	}
	if _, err := engine.BackupContext(ctx, target, wharf.BackupOptions{}); err != context.Canceled {
		t.Fatalf("BackupContext with a cancelled context: %v", err)
	}
	if _, err := engine.Backup(target, wharf.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	restoreCtx, cancelRestore := context.WithCancel(context.Background())
	_, err = wharf.RestoreContext(restoreCtx, target, filepath.Join(t.TempDir(), "r"),
		wharf.RestoreOptions{Progress: func(copied, total uint64) error {
			cancelRestore()
			return nil
		}})
	if err != context.Canceled {
		t.Fatalf("RestoreContext cancelled during the copy: %v", err)
	}

	if err := engine.DeclareTable("acct", 2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		txn, _ := engine.Begin()
		txn.Put("acct", []byte(fmt.Sprintf("a%02d", i)), []byte("v1"))
		txn.Commit()
	}
	// Rows written at version 2, then the table raised to 3: every row needs the step 2 -> 3.
	if err := engine.DeclareTable("acct", 3); err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterMigration("acct", 2, func(row []byte) ([]byte, error) {
		return append(row, "+3"...), nil
	}); err != nil {
		t.Fatal(err)
	}
	migrateCtx, cancelMigrate := context.WithCancel(context.Background())
	report, err := engine.MigrateTableContext(migrateCtx, "acct", wharf.MigrateOptions{
		BatchRows: 10,
		Progress: func(wharf.MigrateReport) bool {
			cancelMigrate()
			return true
		}})
	if err != context.Canceled || report.Done || report.Migrated == 0 || report.Migrated >= 40 {
		t.Fatalf("MigrateTableContext cancelled after a batch: %+v %v", report, err)
	}
	report, err = engine.MigrateTable("acct", wharf.MigrateOptions{})
	if err != nil || !report.Done || report.Migrated == 0 || report.Migrated >= 40 {
		t.Fatalf("the migration after the cancelled one: %+v %v", report, err)
	}
}
