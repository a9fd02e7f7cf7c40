package wharf_test

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	wharf "github.com/wharf/wharf/api/go"
)

// Replication through the binding against one real nats-server -js (replicate_replicas=1),
// started on a free port in a temp dir and stopped by pid: a primary committing under
// durability=replicated, RestoreFromStream elsewhere, a standby promoted by Open with replicate
// and the old primary's commit failing with ErrPrimaryFenced. About 5 s.

// startNats starts nats-server -js on a free loopback port; it is killed when the test ends.
func startNats(t *testing.T) int {
	t.Helper()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	server := exec.Command("nats-server", "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port),
		"-sd", filepath.Join(t.TempDir(), "nats"))
	if err := server.Start(); err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
	})
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			conn.Close()
			return port
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("nats-server did not start")
	return 0
}

func replicaOptions(port int, stream, durability string) string {
	return fmt.Sprintf("partitions=4;admin_socket=off;durability=%s;replicate=nats://127.0.0.1:%d;"+
		"replicate_stream=%s;replicate_replicas=1;replicate_timeout_ms=5000", durability, port, stream)
}

// commitRows commits rows [from, to) of table "rows", a fact each, one transaction per row.
func commitRows(t *testing.T, engine *wharf.Engine, from, to int) {
	t.Helper()
	if err := engine.DeclareTypes("RowWritten"); err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		txn, err := engine.Begin()
		if err != nil {
			t.Fatal(err)
		}
		key, value := []byte(fmt.Sprintf("row-%d", i)), []byte(fmt.Sprintf("value-%d", i))
		if err := txn.Put("rows", key, value); err != nil {
			t.Fatal(err)
		}
		if err := txn.Emit("RowWritten", key, value); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(); err != nil {
			t.Fatalf("commit row %d: %v", i, err)
		}
	}
}

// expectRows checks every row of [0, count) is in the database at path (opened unreplicated).
func expectRows(t *testing.T, path string, count int) {
	t.Helper()
	engine, err := wharf.Open(path, "admin_socket=off")
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	for i := 0; i < count; i++ {
		value, err := engine.Get("rows", []byte(fmt.Sprintf("row-%d", i)))
		if err != nil || string(value) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("row %d: %q, %v", i, value, err)
		}
	}
}

func TestReplicatedCommitsAreInARestoreElsewhere(t *testing.T) {
	port := startNats(t)
	dir := t.TempDir()
	primary, err := wharf.Open(filepath.Join(dir, "primary"), replicaOptions(port, "G1", "replicated"))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	commitRows(t, primary, 0, 30)
	// The machine is lost: the primary's directory is not read again.
	copyPath := filepath.Join(dir, "copy")
	report, err := wharf.RestoreFromStream(replicaOptions(port, "G1", "sync"), copyPath, false)
	if err != nil {
		t.Fatal(err)
	}
	if report.LastFactID != 30 || report.LastGroup != report.SnapshotGroup+report.GroupsApplied ||
		!regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(report.SnapshotID) {
		t.Fatalf("report %+v", report)
	}
	expectRows(t, copyPath, 30)
	// Again into the same directory: refused without force, replaced with it.
	if _, err := wharf.RestoreFromStream(replicaOptions(port, "G1", "sync"), copyPath, false); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("restore into a full directory: %v, want ErrInvalidArgument", err)
	}
	if _, err := wharf.RestoreFromStream(replicaOptions(port, "G1", "sync"), copyPath, true); err != nil {
		t.Fatal(err)
	}
	expectRows(t, copyPath, 30)

	// Refusals.
	if _, err := wharf.RestoreFromStream("", filepath.Join(dir, "c"), false); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("no replicate: %v", err)
	}
	if _, err := wharf.RestoreFromStream(replicaOptions(port, "G0", "sync"), filepath.Join(dir, "c"), false); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("no stream: %v", err)
	}
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := wharf.StartStandby(replicaOptions(port, "G1", "sync"), filepath.Join(dir, "primary")); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("a standby in a primary's directory: %v", err)
	}
}

func TestStandbyIsPromotedAndTheOldPrimaryIsFenced(t *testing.T) {
	port := startNats(t)
	dir := t.TempDir()
	primaryPath := filepath.Join(dir, "primary")
	primary, err := wharf.Open(primaryPath, replicaOptions(port, "G2", "replicated"))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	commitRows(t, primary, 0, 10)
	copyPath := filepath.Join(dir, "standby")
	standby, err := wharf.StartStandby(replicaOptions(port, "G2", "sync"), copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	commitRows(t, primary, 10, 20) // followed as they come
	var state wharf.StandbyState
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if state, err = standby.State(); err != nil {
			t.Fatal(err)
		}
		if state.LastFactID >= 20 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if state.LastFactID != 20 || state.StreamGroup < state.AppliedGroup || state.LastAppliedMs <= 0 {
		t.Fatalf("state %+v", state)
	}
	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if stopped, err := standby.State(); err != nil || stopped.AppliedGroup != state.AppliedGroup {
		t.Fatalf("state after stop: %+v, %v", stopped, err)
	}
	if err := standby.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.State(); !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("state after close: %v, want ErrClosed", err)
	}

	// Promoted while the old primary still runs: Open with replicate takes the stream over.
	promoted, err := wharf.Open(copyPath, replicaOptions(port, "G2", "replicated"))
	if err != nil {
		t.Fatal(err)
	}
	defer promoted.Close()
	commitRows(t, promoted, 20, 25)
	txn, err := primary.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Put("rows", []byte("fork"), []byte("no")); err != nil {
		t.Fatal(err)
	}
	_, err = txn.Commit()
	var werr *wharf.Error
	if !errors.Is(err, wharf.ErrPrimaryFenced) || !errors.Is(err, wharf.ErrConflict) ||
		!errors.As(err, &werr) || werr.Subcode != wharf.SubcodePrimaryFenced {
		t.Fatalf("old primary's commit: %v, want ErrPrimaryFenced", err)
	}
	if errors.Is(err, wharf.ErrReadConflict) {
		t.Fatal("a fenced commit matched ErrReadConflict")
	}
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := wharf.Open(primaryPath, replicaOptions(port, "G2", "replicated")); !errors.Is(err, wharf.ErrPrimaryFenced) {
		t.Fatalf("reopening the old primary: %v, want ErrPrimaryFenced", err)
	}
	if err := promoted.Close(); err != nil {
		t.Fatal(err)
	}
	expectRows(t, copyPath, 25)
}
