package wharf_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	wharf "github.com/wharf/wharf/api/go"
)

// skipUntilCoreBuilt skips a success path while the backup core answers "not built yet".
func skipUntilCoreBuilt(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, wharf.ErrNotSupported) && strings.Contains(err.Error(), "not built yet") {
		t.Skipf("backup core not built yet: %v", err)
	}
}

// fillForBackup commits state and three facts, and has the projection "audit" pass them (its
// cursors); it returns the last fact id.
func fillForBackup(t *testing.T, engine *wharf.Engine) uint64 {
	t.Helper()
	commitOrder(t, engine, "o-1", "k", 1250)
	commitOrder(t, engine, "o-2", "k", 700)
	last := commitOrder(t, engine, "o-3", "k", 300)
	if audited := drainAudit(t, engine); audited != 3 {
		t.Fatalf("audit saw %d facts, want 3", audited)
	}
	return last
}

// drainAudit delivers what the projection "audit" has not passed yet; returns how many facts.
func drainAudit(t *testing.T, engine *wharf.Engine) int {
	t.Helper()
	runtime, err := wharf.NewRuntime(engine, "workers=0")
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.Close()
	var mu sync.Mutex
	seen := 0
	err = runtime.Project("audit", []string{"OrderPlaced"}, "",
		func(f *wharf.Fact, effects *wharf.Txn) error {
			mu.Lock()
			defer mu.Unlock()
			seen++
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Drain(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return seen
}

func expectInvalid(t *testing.T, err error, text string) {
	t.Helper()
	if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), text) {
		t.Errorf("got %v, want ErrInvalidArgument naming %q", err, text)
	}
}

func TestBackupRefusesBadArguments(t *testing.T) {
	engine := open(t, "partitions=4")
	dir := t.TempDir()
	target, destination := filepath.Join(dir, "backups"), filepath.Join(dir, "restored")

	_, err := engine.Backup("", wharf.BackupOptions{})
	expectInvalid(t, err, "target is empty")
	_, err = engine.Backup("back\x00ups", wharf.BackupOptions{})
	expectInvalid(t, err, "target \"back\\x00ups\" contains a NUL byte")
	_, err = wharf.ListBackups("")
	expectInvalid(t, err, "target is empty")
	_, err = wharf.Restore("", destination, wharf.RestoreOptions{})
	expectInvalid(t, err, "target is empty")
	_, err = wharf.Restore(target, "", wharf.RestoreOptions{})
	expectInvalid(t, err, "destination is empty")
	_, err = wharf.Restore(target, "dest\x00", wharf.RestoreOptions{})
	expectInvalid(t, err, "destination")
	report, err := wharf.VerifyDatabase("")
	expectInvalid(t, err, "path is empty")
	if report != nil {
		t.Errorf("a refused verification returned a report: %+v", report)
	}
	_, err = wharf.VerifyBackup("x\x00", 0)
	expectInvalid(t, err, "contains a NUL byte")
	for _, path := range []string{target, destination} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused calls (%v)", path, err)
		}
	}

	if incarnation, err := engine.Incarnation(); err != nil || incarnation != 0 {
		t.Errorf("Incarnation of a database never restored: %d %v", incarnation, err)
	}
	engine.Close()
	if _, err := engine.Backup(target, wharf.BackupOptions{}); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("Backup after Close: %v, want ErrClosed", err)
	}
	if _, err := engine.Incarnation(); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("Incarnation after Close: %v, want ErrClosed", err)
	}
}

func TestBackupRestoreOpenVerify(t *testing.T) {
	engine := open(t, "partitions=4")
	dir := t.TempDir()
	target, destination := filepath.Join(dir, "backups"), filepath.Join(dir, "restored")
	last := fillForBackup(t, engine)
	var calls [][2]uint64
	info, err := engine.Backup(target, wharf.BackupOptions{Progress: func(copied, total uint64) error {
		calls = append(calls, [2]uint64{copied, total})
		return nil
	}})
	skipUntilCoreBuilt(t, err)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if info.ID != 1 || info.LastFactID != last || info.DurableLSN != last || info.Partitions != 4 ||
		info.Files == 0 || info.Incarnation != 0 {
		t.Errorf("backup info %+v (last fact %d)", info, last)
	}
	if len(calls) == 0 {
		t.Error("the progress callback was never called")
	}
	for _, c := range calls {
		if c[0] > c[1] {
			t.Errorf("progress copied %d above total %d", c[0], c[1])
		}
	}
	// A target lists what was stored with the backup at its point (not its duration or copied
	// bytes, known only after its list of files was written).
	backups, err := wharf.ListBackups(target)
	if err != nil || len(backups) != 1 || backups[0].ID != 1 || backups[0].LastFactID != last ||
		backups[0].SizeBytes != info.SizeBytes || backups[0].Files != info.Files {
		t.Fatalf("ListBackups: %+v %v, want [%+v]", backups, err, info)
	}

	restored, err := wharf.Restore(target, destination, wharf.RestoreOptions{})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if restored.Backup != backups[0] || restored.Incarnation == 0 {
		t.Errorf("restore report %+v", restored)
	}
	if _, err := wharf.Restore(target, destination, wharf.RestoreOptions{}); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Errorf("restore into a non-empty destination without Force: %v", err)
	}
	reopened, err := wharf.Open(destination, "")
	if err != nil {
		t.Fatalf("open the restored database: %v", err)
	}
	defer reopened.Close()
	if incarnation, err := reopened.Incarnation(); err != nil || incarnation != restored.Incarnation {
		t.Errorf("restored incarnation %d %v, want %d", incarnation, err, restored.Incarnation)
	}
	if value, err := reopened.Get("orders", []byte("o-3")); err != nil || string(value) != "300" {
		t.Errorf("restored state: %q %v", value, err)
	}
	if lsn, err := reopened.DurableLSN(); err != nil || lsn != last {
		t.Errorf("restored durable LSN %d %v, want %d", lsn, err, last)
	}
	if err := reopened.DeclareTypes("OrderPlaced"); err != nil {
		t.Fatal(err)
	}
	// The cursor came along: the projection resumes after what it had passed.
	if audited := drainAudit(t, reopened); audited != 0 {
		t.Errorf("audit saw %d facts again after the restore", audited)
	}
	if id := commitOrder(t, reopened, "o-4", "k", 1); id != last+1 {
		t.Errorf("first fact after the restore has id %d, want %d", id, last+1)
	}
	if audited := drainAudit(t, reopened); audited != 1 {
		t.Errorf("audit saw %d new facts, want 1", audited)
	}
	reopened.Close()
	report, err := wharf.VerifyDatabase(destination)
	skipUntilCoreBuilt(t, err)
	if err != nil || !report.OK() || len(report.Families) != 7 || report.Families[0].Name != "outbox" ||
		report.Families[0].Records < 3 {
		t.Errorf("VerifyDatabase: %+v %v", report, err)
	}
	report, err = wharf.VerifyBackup(target, 0)
	if err != nil || !report.OK() || report.BackupID != 1 || report.Files == 0 {
		t.Errorf("VerifyBackup: %+v %v", report, err)
	}

}

func TestBackupProgressFailureIsNeverSuccess(t *testing.T) {
	engine := open(t, "partitions=4")
	fillForBackup(t, engine)
	target := filepath.Join(t.TempDir(), "backups")
	errStop := errors.New("stop the backup")
	calls := 0
	_, err := engine.Backup(target, wharf.BackupOptions{Progress: func(copied, total uint64) error {
		calls++
		return errStop
	}})
	skipUntilCoreBuilt(t, err)
	if err != errStop || calls != 1 {
		t.Errorf("Backup with a failing progress: %v after %d calls, want the callback's error after 1", err, calls)
	}

	func() {
		defer func() {
			if p := recover(); p != "progress panicked" {
				t.Errorf("recovered %v, want the progress callback's panic", p)
			}
		}()
		_, err := engine.Backup(target, wharf.BackupOptions{Progress: func(copied, total uint64) error {
			panic("progress panicked")
		}})
		t.Errorf("Backup returned (%v) although its progress callback panicked", err)
	}()

	_, err = wharf.Restore(target, filepath.Join(t.TempDir(), "restored"), wharf.RestoreOptions{
		Progress: func(copied, total uint64) error { return errStop }})
	if err != errStop {
		t.Errorf("Restore with a failing progress: %v, want the callback's error", err)
	}
}

func TestVerifyBackupReportsDamageWithTheReport(t *testing.T) {
	engine := open(t, "partitions=4")
	fillForBackup(t, engine)
	target := filepath.Join(t.TempDir(), "backups")
	_, err := engine.Backup(target, wharf.BackupOptions{})
	skipUntilCoreBuilt(t, err)
	if err != nil {
		t.Fatal(err)
	}
	// Damage one table file of the backup in its middle (its size stays).
	tables, _ := filepath.Glob(filepath.Join(target, "shared_checksum", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table file in the backup")
	}
	data, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xFF
	if err := os.WriteFile(tables[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	report, err := wharf.VerifyBackup(target, 0)
	skipUntilCoreBuilt(t, err)
	if !errors.Is(err, wharf.ErrCorruption) || report == nil {
		t.Fatalf("VerifyBackup of a damaged backup: %+v %v, want the report and ErrCorruption", report, err)
	}
	if report.OK() || report.DamageCount == 0 || len(report.Damage) == 0 ||
		!strings.Contains(err.Error(), report.Damage[0].Place) {
		t.Errorf("damage report %+v for %v", report, err)
	}
}
