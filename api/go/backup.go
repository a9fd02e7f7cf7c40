package wharf

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status backup_go(wharf_engine* engine, const char* target, uint32_t keep,
                       uint64_t rate_limit_bytes_per_s, void* ctx, wharf_backup_info* info);
wharf_status restore_go(const char* target, const char* destination, uint32_t backup_id,
                        uint8_t force, uint64_t rate_limit_bytes_per_s, void* ctx,
                        wharf_backup_info* info, uint64_t* incarnation);
wharf_status list_backups_go(const char* target, void* ctx);
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// BackupInfo describes one backup in a target (Engine.Backup, ListBackups, Restore).
type BackupInfo struct {
	ID         uint32 // 1, 2, ... in the order they were taken
	CreatedMs  int64  // wall clock when its point was taken
	DurationMs int64
	// Its point: every commit with fact ids up to LastFactID, nothing after. DurableLSN is the
	// engine's durable LSN at the point (equal to LastFactID).
	LastFactID    uint64
	DurableLSN    uint64
	SizeBytes     uint64 // its files, shared ones included
	CopiedBytes   uint64 // what this backup copied; the rest an earlier one held already
	Files         uint32
	FormatVersion uint64
	Partitions    uint32
	Incarnation   uint64 // of the database at the point (0: never restored)
}

// ProgressFunc is called during a backup's or restore's copy, at most about every 4 MiB and once
// at the end, with the bytes copied so far and an upper bound of the bytes to copy. It runs on the
// library's copying thread (not the caller's goroutine), must be quick and must not call into the
// engine. Returning an error fails the call, which returns that error unchanged; a panic fails it
// too and is raised again from the call, on the caller's goroutine. Either way the callback is not
// called again, and the call never reports success (the copy itself may have completed: a backup
// may then be in the target all the same).
type ProgressFunc func(copiedBytes, totalBytes uint64) error

// BackupOptions are Engine.Backup's options; the zero value takes the defaults.
type BackupOptions struct {
	// Keep only the newest Keep backups in the target after this one (0: remove none).
	Keep uint32
	// Bytes per second the copy may write at most (0: as fast as the disks go).
	RateLimitBytesPerS uint64
	Progress           ProgressFunc // nil: none
}

// RestoreOptions are Restore's options; the zero value restores the newest backup into an empty
// or missing destination.
type RestoreOptions struct {
	BackupID uint32 // 0: the newest backup
	// Replace what the destination holds (its files are removed first). Without it a destination
	// that exists and is not empty is refused (ErrInvalidArgument).
	Force              bool
	RateLimitBytesPerS uint64 // 0: as fast as the disks go
	Progress           ProgressFunc
}

// RestoreReport is what Restore did: the backup restored and the restored database's new
// incarnation (never 0).
type RestoreReport struct {
	Backup      BackupInfo
	Incarnation uint64
}

// progressState is a ProgressFunc's outcome. The callback runs on the library's copying thread,
// the call's goroutine reads the outcome once the call returned: the mutex orders the two for the
// race detector, which cannot see the library's own synchronization.
type progressState struct {
	fn         ProgressFunc
	mu         sync.Mutex
	failed     bool
	err        error
	panicked   bool
	panicValue any
}

// run calls the callback unless it failed already; false when it fails (now or before).
func (p *progressState) run(copied, total uint64) (ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed {
		return false
	}
	returned := false
	defer func() {
		r := recover()
		if !returned {
			p.failed, p.panicked, p.panicValue = true, true, r
		}
	}()
	err := p.fn(copied, total)
	returned = true
	if err != nil {
		p.failed, p.err = true, err
		return false
	}
	return true
}

// outcome is the call's error: the callback's failure when it failed (a panic is raised again
// here), else err.
func (p *progressState) outcome(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.panicked {
		panic(p.panicValue)
	}
	if p.failed {
		return p.err
	}
	return err
}

//export wharfGoProgress
func wharfGoProgress(ctx unsafe.Pointer, copied C.uint64_t, total C.uint64_t) C.wharf_status {
	state := cellValue(ctx).(*progressState)
	returned := false
	defer func() {
		if !returned {
			exitOnGoexit() // see runHandler: only runtime.Goexit leaves run without returning
		}
	}()
	ok := state.run(uint64(copied), uint64(total))
	returned = true
	if ok {
		return C.WHARF_OK
	}
	// Any failure: the Go side returns the callback's own error or panic (outcome).
	return C.WHARF_INVALID_ARGUMENT
}

//export wharfGoBackupRow
func wharfGoBackupRow(ctx unsafe.Pointer, info *C.wharf_backup_info) {
	cellValue(ctx).(func(BackupInfo))(goBackupInfo(info))
}

func goBackupInfo(c *C.wharf_backup_info) BackupInfo {
	return BackupInfo{
		ID: uint32(c.id), CreatedMs: int64(c.created_ms), DurationMs: int64(c.duration_ms),
		LastFactID: uint64(c.last_fact_id), DurableLSN: uint64(c.durable_lsn),
		SizeBytes: uint64(c.size_bytes), CopiedBytes: uint64(c.copied_bytes),
		Files: uint32(c.files), FormatVersion: uint64(c.format_version),
		Partitions: uint32(c.partitions), Incarnation: uint64(c.incarnation),
	}
}

// withProgress runs call with the C ctx of fn (nil when fn is nil) and returns its outcome.
func withProgress(fn ProgressFunc, call func(ctx unsafe.Pointer) error) error {
	if fn == nil {
		return call(nil)
	}
	state := &progressState{fn: fn}
	cell := newCell(state)
	defer freeCell(cell)
	return state.outcome(call(cell))
}

// Backup backs the database up into directory target (created if missing) while the engine keeps
// committing and delivering, and describes the new backup. Only the table files the target does
// not hold yet are copied. ErrInvalidArgument names a bad argument (an empty target or one holding
// a NUL byte, the database directory itself, a target inside it); ErrIOError names the file that
// could not be read or written, or another backup into the same target in progress. Blocks for the
// whole copy; from a handler it is refused (ErrInvalidArgument).
func (e *Engine) Backup(target string, opts BackupOptions) (BackupInfo, error) {
	if err := refuseInHandler("Engine.Backup"); err != nil {
		return BackupInfo{}, err
	}
	var args cArgs
	defer args.free()
	ctarget := args.str("target", target)
	if args.err != nil {
		return BackupInfo{}, args.err
	}
	var info C.wharf_backup_info
	err := withProgress(opts.Progress, func(ctx unsafe.Pointer) error {
		return e.with(func(c *C.wharf_engine) C.wharf_status {
			return C.backup_go(c, ctarget, C.uint32_t(opts.Keep), C.uint64_t(opts.RateLimitBytesPerS),
				ctx, &info)
		})
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return goBackupInfo(&info), nil
}

// BackupContext is Backup bounded by ctx: when ctx ends, the copy stops at its next progress
// report (at most about every 4 MiB copied) and ctx.Err() is returned, never success (when the
// copy had completed, a backup may be in the target all the same: ListBackups shows it). The
// attempt is recorded as failed (Stat's LastBackup).
func (e *Engine) BackupContext(ctx context.Context, target string, opts BackupOptions) (
	BackupInfo, error) {
	if err := ctx.Err(); err != nil {
		return BackupInfo{}, err
	}
	opts.Progress = progressUntil(ctx, opts.Progress)
	return e.Backup(target, opts)
}

// progressUntil is fn failing with ctx.Err() once ctx ended (fn itself when ctx never ends).
func progressUntil(ctx context.Context, fn ProgressFunc) ProgressFunc {
	if ctx.Done() == nil {
		return fn
	}
	return func(copied, total uint64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(copied, total); err != nil {
				return err
			}
		}
		// Ended during fn, or meanwhile: this report already stops the call (a restore that
		// copies quickly may make no report but its last).
		return ctx.Err()
	}
}

// ListBackups lists the backups in directory target, oldest first (no engine needed).
// errors.Is(err, ErrNotFound) when target holds no backup directory.
func ListBackups(target string) ([]BackupInfo, error) {
	var args cArgs
	defer args.free()
	ctarget := args.str("target", target)
	if args.err != nil {
		return nil, args.err
	}
	var backups []BackupInfo
	cell := newCell(func(info BackupInfo) { backups = append(backups, info) })
	defer freeCell(cell)
	if err := call(func() C.wharf_status { return C.list_backups_go(ctarget, cell) }); err != nil {
		return nil, err
	}
	return backups, nil
}

// Restore restores backup opts.BackupID (0: the newest) of target into directory destination,
// checking every file's size and checksum, and starts the restored database's new incarnation
// after the backup's point; Open(destination, ...) opens it then. ErrNotFound: no such backup;
// ErrInvalidArgument: a non-empty destination without Force, a destination inside target;
// ErrCorruption: a file that does not match its checksum or size, named (nothing is left in the
// destination); ErrNotSupported: a backup of a newer format version. Not from a handler.
func Restore(target, destination string, opts RestoreOptions) (RestoreReport, error) {
	if err := refuseInHandler("Restore"); err != nil {
		return RestoreReport{}, err
	}
	var args cArgs
	defer args.free()
	ctarget := args.str("target", target)
	cdestination := args.str("destination", destination)
	if args.err != nil {
		return RestoreReport{}, args.err
	}
	force := C.uint8_t(0)
	if opts.Force {
		force = 1
	}
	var info C.wharf_backup_info
	var incarnation C.uint64_t
	err := withProgress(opts.Progress, func(ctx unsafe.Pointer) error {
		return call(func() C.wharf_status {
			return C.restore_go(ctarget, cdestination, C.uint32_t(opts.BackupID), force,
				C.uint64_t(opts.RateLimitBytesPerS), ctx, &info, &incarnation)
		})
	})
	if err != nil {
		return RestoreReport{}, err
	}
	return RestoreReport{Backup: goBackupInfo(&info), Incarnation: uint64(incarnation)}, nil
}

// RestoreContext is Restore bounded by ctx: when ctx ends, the copy stops at its next progress
// report (at most about every 4 MiB copied) and ctx.Err() is returned. The destination must not
// be used then: restore again (RestoreOptions.Force replaces what the stopped restore left).
func RestoreContext(ctx context.Context, target, destination string, opts RestoreOptions) (
	RestoreReport, error) {
	if err := ctx.Err(); err != nil {
		return RestoreReport{}, err
	}
	opts.Progress = progressUntil(ctx, opts.Progress)
	return Restore(target, destination, opts)
}

// VerifyFamily is one column family a verification read.
type VerifyFamily struct {
	Name    string // outbox, cursors, leases, timers, dead, state, meta
	Records uint64
	Bytes   uint64 // keys and values as stored
}

// VerifyDamage is one damaged place a verification found.
type VerifyDamage struct {
	Place   string // "table file 000123.sst", "outbox record of fact 42 (partition 3)"
	Problem string // what does not verify
}

// VerifyReport is what VerifyDatabase or VerifyBackup read and found. Damage lists the first
// damaged places (at most 20, in reading order); DamageCount counts every one found.
type VerifyReport struct {
	Families    []VerifyFamily
	Files       uint64 // files checked (a backup's against its list too)
	FileBytes   uint64
	Damage      []VerifyDamage
	DamageCount uint64
	BackupID    uint32 // VerifyBackup: the backup verified; 0 for VerifyDatabase
}

// OK reports whether nothing is damaged.
func (r *VerifyReport) OK() bool { return r.DamageCount == 0 && len(r.Damage) == 0 }

// VerifyDatabase reads every record of every column family of the database in directory path and
// checks every checksum and record format; it works on a stopped database and on one an engine
// holds, and writes nothing. On damage it returns the report together with an error for which
// errors.Is(err, ErrCorruption) holds (its message names the first damaged place); otherwise the
// report and nil, or nil and the error when the database cannot be opened (ErrIOError,
// ErrNotFound).
func VerifyDatabase(path string) (*VerifyReport, error) {
	var args cArgs
	defer args.free()
	cpath := args.str("path", path)
	if args.err != nil {
		return nil, args.err
	}
	return verify(func(out **C.wharf_verify_report) C.wharf_status {
		return C.wharf_verify_database(cpath, out)
	})
}

// VerifyBackup checks every file of backup backupID (0: the newest) in target against the
// backup's list (size and CRC32C), then reads it as VerifyDatabase does. Results as there.
func VerifyBackup(target string, backupID uint32) (*VerifyReport, error) {
	var args cArgs
	defer args.free()
	ctarget := args.str("target", target)
	if args.err != nil {
		return nil, args.err
	}
	return verify(func(out **C.wharf_verify_report) C.wharf_status {
		return C.wharf_verify_backup(ctarget, C.uint32_t(backupID), out)
	})
}

// verify runs a verification and reads its report (handed out on OK and on Corruption), on one
// OS thread so that the error read is this call's.
func verify(run func(**C.wharf_verify_report) C.wharf_status) (*VerifyReport, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var report *C.wharf_verify_report
	status := run(&report)
	err := check(status)
	if status != C.WHARF_OK && status != C.WHARF_CORRUPTION {
		return nil, err
	}
	defer C.wharf_verify_report_free(report)
	r := &VerifyReport{
		Files:       uint64(C.wharf_verify_report_files(report)),
		FileBytes:   uint64(C.wharf_verify_report_file_bytes(report)),
		DamageCount: uint64(C.wharf_verify_report_damage_count(report)),
		BackupID:    uint32(C.wharf_verify_report_backup_id(report)),
	}
	for i := C.size_t(0); i < C.wharf_verify_report_family_count(report); i++ {
		var name *C.char
		var records, bytes C.uint64_t
		if e := check(C.wharf_verify_report_family(report, i, &name, &records, &bytes)); e != nil {
			return nil, e
		}
		r.Families = append(r.Families, VerifyFamily{C.GoString(name), uint64(records), uint64(bytes)})
	}
	for i := C.size_t(0); i < C.wharf_verify_report_damage_listed(report); i++ {
		var place, problem *C.char
		if e := check(C.wharf_verify_report_damage(report, i, &place, &problem)); e != nil {
			return nil, e
		}
		r.Damage = append(r.Damage, VerifyDamage{C.GoString(place), C.GoString(problem)})
	}
	return r, err
}

// Incarnation is the incarnation new facts are emitted in: 0 for a database never restored, else
// the random number its restore started (relays carry it into their de-duplication).
func (e *Engine) Incarnation() (uint64, error) {
	var incarnation C.uint64_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_engine_incarnation(c, &incarnation)
	})
	return uint64(incarnation), err
}
