package wharf

// Table versions: declared row versions of state tables, their migrations, and MigrateTable.

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status register_migration_go(wharf_engine* engine, const char* table, uint32_t from_v,
                                   void* ctx);
wharf_status migrate_table_go(wharf_engine* engine, const char* table, size_t batch_rows,
                              uint64_t rows_per_second, uint8_t dry_run, void* ctx,
                              wharf_migrate_report* report);
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// DeclareTable declares state table table at row version version (>= 1), or raises its declared
// version to it (persisted). Rows written from then on are stored at version; a row stored at an
// older one is lifted by the migrations registered for the versions between (RegisterMigration)
// when it is read: Get and Scan return it lifted without writing it, a transaction that reads it
// writes it back in its own commit, and MigrateTable writes the rest. The first declaration above
// 1 raises the database's format version (older builds refuse to open it). Declaring the version
// it has is a no-op. ErrInvalidArgument: a bad name, version 0, or a version below the declared
// one (it never goes back).
func (e *Engine) DeclareTable(table string, version uint32) error {
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_declare_table(c, ctable, C.uint32_t(version))
	})
}

// TableVersion is the declared row version of state table table: 1 for a table never declared
// above it.
func (e *Engine) TableVersion(table string) (uint32, error) {
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return 0, args.err
	}
	var version C.uint32_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_table_version(c, ctable, &version)
	})
	return uint32(version), err
}

// MigrationFunc lifts a row of its table from one version to the next and returns the new row,
// or an error refusing it. It must be a pure function of the row, safe for concurrent use: it
// runs on the goroutine that reads the row (Get, Scan, a transaction's or a handler's reads,
// MigrateTable), several at once, and must not call into the engine. It may keep row.
type MigrationFunc func(row []byte) ([]byte, error)

// RegisterMigration registers fn as the step that lifts rows of state table table from version
// fromV to fromV + 1. It is not persisted: register every step on every Open, before reading the
// table; a read of a row whose chain misses a step fails with ErrNotSupported naming it. A read of
// a row fn refuses (an error, or a panic: never taken for a success) fails with ErrNotSupported
// "table 'T', key K: migrating the row from version N to N+1: ..." ending with the error's text
// (or "the migration panicked: ..."), and nothing is written (a migration calling runtime.Goexit
// ends the process: it cannot cross the C library, see SubscribeFunc). The engine keeps fn until
// it is closed. ErrInvalidArgument: a table at version 1 (DeclareTable first), fromV 0 or not
// below the declared version, a nil fn, or a step already registered.
func (e *Engine) RegisterMigration(table string, fromV uint32, fn MigrationFunc) error {
	if fn == nil {
		return &Error{Status: StatusInvalidArgument, Message: "the migration is nil"}
	}
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		// Owned by the engine from here: destroy_shim frees the cell when it lets go of the
		// migration (at Close), or before a failing registration returns.
		return C.register_migration_go(c, ctable, C.uint32_t(fromV), newCell(fn))
	})
}

// migrationCallback names a migration in the reasons of its failures.
var migrationCallback = callbackKind{"migration", "wharf: a migration called runtime.Goexit " +
	"(t.Fatal, t.FailNow, t.SkipNow?), which cannot cross the C library; the row was not read; " +
	"exiting"}

//export wharfGoMigrate
func wharfGoMigrate(ctx unsafe.Pointer, row unsafe.Pointer, n C.size_t,
	out *C.wharf_upcast) C.wharf_status {
	fn := cellValue(ctx).(MigrationFunc)
	in := goBytes(row, n)
	var lifted []byte
	// Only a nil error is success; an error, a panic or an error whose text cannot be read refuse
	// the row, with the best reason that can be recovered.
	outcome, reason := runCallback(migrationCallback, func() error {
		var err error
		lifted, err = fn(in)
		return err
	})
	if outcome == Handled {
		status := C.wharf_upcast_result(out, bytesPtr(lifted), C.size_t(len(lifted)))
		runtime.KeepAlive(lifted)
		if status == C.WHARF_OK {
			return C.WHARF_OK
		}
		reason = "the migrated row was refused: " + C.GoString(C.wharf_last_error())
	}
	var args cArgs
	defer args.free()
	// A NUL byte would end the C string there: written as \0, the reason arrives whole.
	C.wharf_upcast_fail(out, args.str("reason", strings.ReplaceAll(reason, "\x00", `\0`)))
	return upcastRefused
}

// MigrateReport is MigrateTable's progress (what MigrateOptions.Progress receives) and outcome.
type MigrateReport struct {
	Version  uint32 // the table's declared version: the one rows are migrated to
	Rows     uint64 // rows visited
	Migrated uint64 // of them, rows found at an older version and migrated (DryRun: would be)
	Batches  uint64 // transactions committed (DryRun: batches read)
	Done     bool   // the whole table was visited (false: Progress stopped it)
}

// MigrateBatchRowsMax is the most rows one batch of MigrateTable visits (MigrateOptions.BatchRows).
const MigrateBatchRowsMax = 100000

// MigrateOptions are MigrateTable's options; the zero value takes the defaults.
type MigrateOptions struct {
	// Rows per transaction, 1..MigrateBatchRowsMax (0: 256). Concurrent commits wait for a batch
	// at most as long as for a commit of this many rows.
	BatchRows int
	// Rows migrated per second at most, across batches (0: as fast as the commits go).
	RowsPerSecond uint64
	// Lift every row in memory and commit nothing: counts what would be migrated and finds the
	// first row a migration refuses (or a missing step) without changing anything.
	DryRun bool
	// Called after every batch but the last, on the calling goroutine, with the progress so far:
	// true goes on, false stops there (MigrateTable then returns with Done false; a later call
	// starts again from the table's first row, passing over the rows already migrated). A panic
	// stops it too and is raised again from MigrateTable once the library let go of the
	// migration. It must not call MigrateTable. nil: none.
	Progress func(MigrateReport) bool
}

// migrateState is a MigrateTable call's progress callback, reached by wharfGoMigrateProgress
// through a cell. It runs on the calling goroutine (the library calls it on the calling thread).
type migrateState struct {
	fn         func(MigrateReport) bool
	panicked   bool
	panicValue any
}

func goMigrateReport(c *C.wharf_migrate_report) MigrateReport {
	return MigrateReport{Version: uint32(c.version), Rows: uint64(c.rows),
		Migrated: uint64(c.migrated), Batches: uint64(c.batches), Done: c.done != 0}
}

//export wharfGoMigrateProgress
func wharfGoMigrateProgress(ctx unsafe.Pointer, soFar *C.wharf_migrate_report) C.int {
	state := cellValue(ctx).(*migrateState)
	returned := false
	defer func() {
		if !returned {
			exitOnGoexit() // see runHandler: only runtime.Goexit leaves report without returning
		}
	}()
	stop := state.report(goMigrateReport(soFar))
	returned = true
	return stop
}

// report hands the progress so far to the callback: 0 to go on, 1 to stop (it returned false, or
// panicked: the panic is kept for MigrateTable to raise again).
func (s *migrateState) report(soFar MigrateReport) (stop C.int) {
	stop = 1
	returned := false
	defer func() {
		p := recover()
		if !returned {
			s.panicked = true
			s.panicValue = p
		}
	}()
	goOn := s.fn(soFar)
	returned = true
	if goOn {
		return 0
	}
	return 1
}

// MigrateTable migrates the rows of state table table still stored at an older version, online:
// it walks the table in key order, opts.BatchRows rows per transaction, each writing back the rows
// it lifted (a batch refused by a concurrent commit runs again), so a crash leaves every row at
// one version or the other, readable either way, and a later call goes on with what is left. It
// returns the outcome, also with an error (what was done before it). A table at version 1 has
// nothing to migrate (Done at once). ErrNotSupported: a row a migration refuses, or a missing
// step, named (the batches before it are committed); ErrConflict: a batch still refused after 16
// attempts; ErrInvalidArgument: a bad name or option; and the errors of Commit. Blocks; from a
// handler or a migration it is refused (ErrInvalidArgument).
func (e *Engine) MigrateTable(table string, opts MigrateOptions) (MigrateReport, error) {
	if err := refuseInHandler("Engine.MigrateTable"); err != nil {
		return MigrateReport{}, err
	}
	if opts.BatchRows < 0 || opts.BatchRows > MigrateBatchRowsMax {
		return MigrateReport{}, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"MigrateOptions.BatchRows %d is not in 1..%d (0: 256)", opts.BatchRows,
			MigrateBatchRowsMax)}
	}
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return MigrateReport{}, args.err
	}
	dryRun := C.uint8_t(0)
	if opts.DryRun {
		dryRun = 1
	}
	var state *migrateState
	var ctx unsafe.Pointer
	if opts.Progress != nil {
		state = &migrateState{fn: opts.Progress}
		ctx = newCell(state)
		defer freeCell(ctx)
	}
	var report C.wharf_migrate_report
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.migrate_table_go(c, ctable, C.size_t(opts.BatchRows),
			C.uint64_t(opts.RowsPerSecond), dryRun, ctx, &report)
	})
	if state != nil && state.panicked {
		// Raised here, on the caller's goroutine: a panic must not unwind through the library's
		// frames (they would never let go of the migration).
		panic(state.panicValue)
	}
	return goMigrateReport(&report), err
}

// MigrateTableContext is MigrateTable bounded by ctx: when ctx ends, the migration stops after
// the batch in progress (every batch committed stays committed; a later call goes on with what is
// left) and returns its report (Done false) with ctx.Err().
func (e *Engine) MigrateTableContext(ctx context.Context, table string, opts MigrateOptions) (
	MigrateReport, error) {
	if err := ctx.Err(); err != nil {
		return MigrateReport{}, err
	}
	if ctx.Done() == nil {
		return e.MigrateTable(table, opts)
	}
	progress := opts.Progress
	opts.Progress = func(soFar MigrateReport) bool {
		if ctx.Err() != nil {
			return false
		}
		return progress == nil || progress(soFar)
	}
	report, err := e.MigrateTable(table, opts)
	if err == nil && !report.Done && ctx.Err() != nil {
		err = ctx.Err()
	}
	return report, err
}
