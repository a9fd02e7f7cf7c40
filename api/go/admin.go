package wharf

// Administration (wharf.h ADMINISTRATION): cursors, dead letters, leases, trimming, retention
// losses and the stat snapshot, as `wharf cursor`, `wharf dead`, `wharf lease`, `wharf trim` and
// `wharf stat` use them. Changes go through the committer: atomic and durable once they return
// nil. Do not change the cursors of a consumer that a running runtime delivers. Every method is
// safe for concurrent use.

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status cursor_list_go(wharf_engine* engine, void* ctx);
wharf_status dead_retry_go(wharf_engine* engine, const char* consumer, const uint64_t* fact_ids,
                           size_t n_fact_ids, void* ctx, uint64_t* retried);
wharf_status lease_list_go(wharf_engine* engine, void* ctx);
wharf_status retention_losses_go(wharf_engine* engine, void* ctx);
wharf_status trim_go(wharf_engine* engine, uint8_t dry_run, wharf_trim_report* report,
                     void* ctx);
wharf_status stat_go(wharf_engine* engine, wharf_stat_snapshot* snapshot, void* ctx);
*/
import "C"

import "unsafe"

// Cursor is one consumer's position in one partition.
type Cursor struct {
	Consumer  string
	Partition uint32
	FactID    uint64 // the last fact it has passed (0: none)
	Epoch     uint64 // lease epoch of the cursor's last writer
}

// Cursor is consumer's position in partition: the id of the last fact it has passed, 0 if none.
func (e *Engine) Cursor(consumer string, partition uint32) (uint64, error) {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return 0, args.err
	}
	var id C.uint64_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_cursor_get(c, cconsumer, C.uint32_t(partition), &id)
	})
	return uint64(id), err
}

// SetCursor sets every partition's cursor of consumer to the last fact with id <= factID (0: the
// start, so everything is delivered again).
func (e *Engine) SetCursor(consumer string, factID uint64) error {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_cursor_set(c, cconsumer, C.uint64_t(factID))
	})
}

// CopyCursors copies every partition's cursor of from to to (e.g. after a rename). ErrNotFound:
// from has none; ErrInvalidArgument (SubcodeAlreadyExists): to has cursors already and force is
// false (force overwrites them).
func (e *Engine) CopyCursors(from, to string, force bool) error {
	var args cArgs
	defer args.free()
	cfrom := args.str("from consumer", from)
	cto := args.str("to consumer", to)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_cursor_copy_v2(c, cfrom, cto, cBool(force))
	})
}

// DeleteCursors deletes every cursor of consumer. ErrNotFound when it has none.
func (e *Engine) DeleteCursors(consumer string) error {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_cursor_delete(c, cconsumer)
	})
}

// Cursors lists every cursor, ordered by consumer then partition.
func (e *Engine) Cursors() ([]Cursor, error) {
	var cursors []Cursor
	err := e.withCell(func(c Cursor) { cursors = append(cursors, c) },
		func(engine *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.cursor_list_go(engine, cell)
		})
	return cursors, err
}

//export wharfGoCursor
func wharfGoCursor(ctx unsafe.Pointer, consumer *C.char, partition C.uint32_t, factID C.uint64_t,
	epoch C.uint64_t) {
	cellValue(ctx).(func(Cursor))(Cursor{C.GoString(consumer), uint32(partition), uint64(factID),
		uint64(epoch)})
}

// withCell runs f with the engine's handle and a cell holding v (a list callback run on the
// calling goroutine), released when f returns.
func (e *Engine) withCell(v any, f func(*C.wharf_engine, unsafe.Pointer) C.wharf_status) error {
	cell := newCell(v)
	defer freeCell(cell)
	return e.with(func(c *C.wharf_engine) C.wharf_status { return f(c, cell) })
}

func cBool(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

// factIDs is a C copy of ids (NULL when empty), released by free.
func (a *cArgs) factIDs(ids []uint64) *C.uint64_t {
	if len(ids) == 0 {
		return nil
	}
	p := (*C.uint64_t)(a.alloc(len(ids), unsafe.Sizeof(C.uint64_t(0))))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(p)), len(ids)), ids)
	return p
}

// PurgeDeadLetters deletes dead letters of consumer for good, in one transaction: those with the
// fact ids given (none given: every one), each checked to be unchanged since it was read, and
// returns how many were deleted. ErrNotFound: the consumer has no dead letters, or an id is none
// of them (nothing changes); ErrConflict: a letter changed meanwhile (nothing changes).
func (e *Engine) PurgeDeadLetters(consumer string, factIDs ...uint64) (uint64, error) {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return 0, args.err
	}
	cids := args.factIDs(factIDs)
	var purged C.uint64_t
	err := e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_dead_purge(c, cconsumer, cids, C.size_t(len(factIDs)), &purged)
	})
	return uint64(purged), err
}

// RetriedLetter is a dead letter RetryDeadLetters re-emitted: its original fact id and the id of
// the new fact.
type RetriedLetter struct {
	DeadFactID uint64
	NewFactID  uint64
}

// RetryDeadLetters re-delivers dead letters of consumer (the fact ids given; none given: every
// one) to that consumer only: each becomes a new fact with the original's type, key, payload and
// headers plus the headers "wharf-retry-for" (the consumer) and "wharf-retry-of" (the original
// id), and its dead letter is deleted in the same transaction (one per batch of letters). It
// returns the letters re-emitted, in id order, also with ErrConflict (a letter changed meanwhile:
// the batches committed before it stay committed). ErrNotFound: no dead letters, or an id is
// none of them (nothing changes); ErrInvalidArgument: a type no longer declared, too many
// headers.
func (e *Engine) RetryDeadLetters(consumer string, factIDs ...uint64) ([]RetriedLetter, error) {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return nil, args.err
	}
	cids := args.factIDs(factIDs)
	var retried []RetriedLetter
	err := e.withCell(func(r RetriedLetter) { retried = append(retried, r) },
		func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.dead_retry_go(c, cconsumer, cids, C.size_t(len(factIDs)), cell, nil)
		})
	return retried, err
}

//export wharfGoRetried
func wharfGoRetried(ctx unsafe.Pointer, deadFactID, newFactID C.uint64_t) {
	cellValue(ctx).(func(RetriedLetter))(RetriedLetter{uint64(deadFactID), uint64(newFactID)})
}

// Lease is one consumer's lease record as stored.
type Lease struct {
	Consumer    string
	Owner       string // the holding instance ("" when released)
	Epoch       uint64 // grows with every acquisition
	ExpiresAtMs int64  // ms since the Unix epoch
	OpenEpoch   uint64 // the engine open that granted it (a lease of an earlier open is void)
}

// Leases lists every consumer's lease record, ordered by consumer. ErrCorruption names a record
// that does not decode.
func (e *Engine) Leases() ([]Lease, error) {
	var leases []Lease
	err := e.withCell(func(l Lease) { leases = append(leases, l) },
		func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.lease_list_go(c, cell)
		})
	return leases, err
}

//export wharfGoLease
func wharfGoLease(ctx unsafe.Pointer, consumer, owner *C.char, epoch C.uint64_t,
	expiresAtMs C.int64_t, openEpoch C.uint64_t) {
	cellValue(ctx).(func(Lease))(Lease{C.GoString(consumer), C.GoString(owner), uint64(epoch),
		int64(expiresAtMs), uint64(openEpoch)})
}

// ReleaseLease releases the lease of consumer (deletes its record if unchanged since read), so
// any instance may take the consumer at once; a former holder still running is fenced once
// another takes it. Meant for a holder that is gone. ErrNotFound: it holds no lease; ErrConflict:
// the lease was renewed or taken meanwhile (nothing changes).
func (e *Engine) ReleaseLease(consumer string) error {
	var args cArgs
	defer args.free()
	cconsumer := args.str("consumer", consumer)
	if args.err != nil {
		return args.err
	}
	return e.with(func(c *C.wharf_engine) C.wharf_status {
		return C.wharf_lease_release(c, cconsumer)
	})
}

// RetentionLoss is what retention (retention_max_bytes, retention_max_age_ms) removed before a
// consumer had passed it.
type RetentionLoss struct {
	Consumer   string
	FactCount  uint64 // over the database's life
	LastMs     uint64 // when the last loss happened (ms since the Unix epoch)
	LastFromID uint64 // the id range of the last loss, over every partition
	LastToID   uint64
}

// RetentionLosses lists every consumer that has lost facts to retention, by consumer id.
func (e *Engine) RetentionLosses() ([]RetentionLoss, error) {
	var losses []RetentionLoss
	err := e.withCell(func(l RetentionLoss) { losses = append(losses, l) },
		func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.retention_losses_go(c, cell)
		})
	return losses, err
}

//export wharfGoRetentionLoss
func wharfGoRetentionLoss(ctx unsafe.Pointer, consumer *C.char, factCount, lastMs, fromID,
	toID C.uint64_t) {
	cellValue(ctx).(func(RetentionLoss))(RetentionLoss{C.GoString(consumer), uint64(factCount),
		uint64(lastMs), uint64(fromID), uint64(toID)})
}

// TrimPartition is one partition of a trim: facts with id <= TrimPoint were passed by every
// consumer; FactCount of them and Bytes were removed (a dry run: would be).
type TrimPartition struct {
	Partition uint32
	TrimPoint uint64
	FactCount uint64
	Bytes     uint64
}

// TrimReport is what Trim removed (a dry run: would remove).
type TrimReport struct {
	ConsumerCount uint64 // consumers with cursors; 0: nothing is known passed, nothing trimmed
	FactCount     uint64
	Bytes         uint64 // their keys and values as stored
	Partitions    []TrimPartition
}

// Trim removes the facts every consumer with a cursor has passed (`wharf trim`); dryRun changes
// nothing and reports what would be removed. ErrConflict: a cursor moved back meanwhile, again
// and again.
func (e *Engine) Trim(dryRun bool) (TrimReport, error) {
	var report TrimReport
	var totals C.wharf_trim_report
	err := e.withCell(func(p TrimPartition) { report.Partitions = append(report.Partitions, p) },
		func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.trim_go(c, cBool(dryRun), &totals, cell)
		})
	if err != nil {
		return TrimReport{}, err
	}
	report.ConsumerCount = uint64(totals.consumer_count)
	report.FactCount = uint64(totals.fact_count)
	report.Bytes = uint64(totals.bytes)
	return report, nil
}

//export wharfGoTrimPartition
func wharfGoTrimPartition(ctx unsafe.Pointer, partition C.uint32_t, trimPoint, factCount,
	bytes C.uint64_t) {
	cellValue(ctx).(func(TrimPartition))(TrimPartition{uint32(partition), uint64(trimPoint),
		uint64(factCount), uint64(bytes)})
}

// StatPartition is one partition of the outbox in a Stat.
type StatPartition struct {
	Partition uint32
	FactCount uint64
	Bytes     uint64 // keys and values as stored
	FirstID   uint64 // 0 when the partition holds no fact
	LastID    uint64
}

// StatLane is one consumer in one partition.
type StatLane struct {
	Partition      uint32
	HasCursor      bool   // false: no cursor here (it is at the start)
	FactID         uint64 // the last fact it passed here
	Epoch          uint64 // lease epoch of the cursor's last writer
	LagFacts       uint64 // facts after the cursor that it takes
	FactsBehind    uint64 // all facts after the cursor
	OldestCommitMs int64  // of the oldest fact it takes after the cursor; 0 when none
}

// StatConsumer is one consumer: every consumer with a cursor, a registration or a retention
// loss.
type StatConsumer struct {
	Consumer       string
	Registered     bool     // a runtime registered its types (lag counts those only)
	Types          []string // the types it takes
	CursorCount    uint64   // partitions where it has a cursor
	FactIDMin      uint64   // lowest and highest position over the partitions (a partition
	FactIDMax      uint64   // without a cursor counts as 0)
	LagFacts       uint64   // facts after its cursors that it takes
	FactsBehind    uint64   // all facts after its cursors
	OldestCommitMs int64    // commit time of the oldest fact it takes and has not passed; 0
	LostFactCount  uint64   // facts retention removed before it had passed them
	LostLastMs     uint64
	LostLastFromID uint64
	LostLastToID   uint64
	// A fact it keeps failing, as its runtime stored it (the partition where it has been retrying
	// longest; zero values when none).
	Retrying          bool
	RetryingPartition uint32
	RetryingFactID    uint64
	RetryingAttempt   uint32 // failed deliveries so far (over restarts)
	RetryingSinceMs   int64
	LastError         string // its last failure's text ("NAME: TEXT"); "" when none
	LastErrorMs       int64
	Lanes             []StatLane // one per partition
}

// LastBackup is the database's most recent backup attempt, as it records it.
type LastBackup struct {
	OK         bool // false: it failed (Error says why)
	FinishedMs int64
	DurationMs int64
	ID         uint32 // when OK: its id in its target
	LastFactID uint64 // when OK: its point
	Target     string
	Error      string
}

// Stat is the stat snapshot (`wharf stat`): LSNs, totals, partitions and consumers. Counts cover
// durable facts above the retention floor.
type Stat struct {
	DurableLSN      uint64 // highest fact id a completed WAL sync covers
	LastLSN         uint64 // highest fact id assigned
	FactCount       uint64 // facts in the outbox, over every partition
	FactBytes       uint64
	DeadLetterCount uint64
	TimerCount      uint64      // timers pending
	NextTimerDueMs  int64       // 0 when none
	Incarnation     uint64      // 0: never restored
	LastBackup      *LastBackup // nil: never backed up
	Partitions      []StatPartition
	Consumers       []StatConsumer
}

// Stat takes a stat snapshot (one scan of the outbox, plus one of the facts after each consumer's
// cursors). ErrCorruption names a record that does not verify.
func (e *Engine) Stat() (Stat, error) {
	var stat Stat
	var snapshot C.wharf_stat_snapshot
	err := e.withCell(&stat, func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
		status := C.stat_go(c, &snapshot, cell)
		if status == C.WHARF_OK && covers(snapshot.struct_size,
			unsafe.Offsetof(snapshot.last_backup_error), unsafe.Sizeof(snapshot.last_backup_error)) &&
			snapshot.last_backup_exists != 0 {
			// The strings are lent until the next wharf_stat on this thread: copied now.
			stat.LastBackup = &LastBackup{OK: snapshot.last_backup_ok != 0,
				FinishedMs: int64(snapshot.last_backup_finished_ms),
				DurationMs: int64(snapshot.last_backup_duration_ms),
				ID:         uint32(snapshot.last_backup_id),
				LastFactID: uint64(snapshot.last_backup_last_fact_id),
				Target:     C.GoString(snapshot.last_backup_target),
				Error:      C.GoString(snapshot.last_backup_error)}
		}
		return status
	})
	if err != nil {
		return Stat{}, err
	}
	stat.DurableLSN = uint64(snapshot.durable_lsn)
	stat.LastLSN = uint64(snapshot.last_lsn)
	stat.FactCount = uint64(snapshot.fact_count)
	stat.FactBytes = uint64(snapshot.fact_bytes)
	stat.DeadLetterCount = uint64(snapshot.dead_letter_count)
	stat.TimerCount = uint64(snapshot.timer_count)
	stat.NextTimerDueMs = int64(snapshot.next_timer_due_ms)
	if covers(snapshot.struct_size, unsafe.Offsetof(snapshot.incarnation),
		unsafe.Sizeof(snapshot.incarnation)) {
		stat.Incarnation = uint64(snapshot.incarnation)
	}
	return stat, nil
}

// covers reports whether a struct of size bytes (as wharf filled it) holds the field at offset.
func covers(size C.size_t, offset, fieldSize uintptr) bool {
	return uintptr(size) >= offset+fieldSize
}

//export wharfGoStatPartition
func wharfGoStatPartition(ctx unsafe.Pointer, row *C.wharf_stat_partition) {
	stat := cellValue(ctx).(*Stat)
	stat.Partitions = append(stat.Partitions, StatPartition{uint32(row.partition),
		uint64(row.fact_count), uint64(row.bytes), uint64(row.first_id), uint64(row.last_id)})
}

//export wharfGoStatConsumer
func wharfGoStatConsumer(ctx unsafe.Pointer, row *C.wharf_stat_consumer) {
	stat := cellValue(ctx).(*Stat)
	consumer := StatConsumer{
		Consumer: C.GoString(row.consumer), Registered: row.registered != 0,
		CursorCount: uint64(row.cursor_count), FactIDMin: uint64(row.fact_id_min),
		FactIDMax: uint64(row.fact_id_max), LagFacts: uint64(row.lag_facts),
		FactsBehind: uint64(row.facts_behind), OldestCommitMs: int64(row.oldest_commit_ms),
		LostFactCount: uint64(row.lost_fact_count), LostLastMs: uint64(row.lost_last_ms),
		LostLastFromID: uint64(row.lost_last_from_id), LostLastToID: uint64(row.lost_last_to_id),
	}
	if row.type_count > 0 {
		types := unsafe.Slice(row.types, row.type_count)
		for _, t := range types {
			consumer.Types = append(consumer.Types, C.GoString(t))
		}
	}
	if covers(row.struct_size, unsafe.Offsetof(row.last_error_ms), unsafe.Sizeof(row.last_error_ms)) {
		consumer.Retrying = row.retrying != 0
		consumer.RetryingPartition = uint32(row.retrying_partition)
		consumer.RetryingFactID = uint64(row.retrying_fact_id)
		consumer.RetryingAttempt = uint32(row.retrying_attempt)
		consumer.RetryingSinceMs = int64(row.retrying_since_ms)
		consumer.LastError = C.GoString(row.last_error)
		consumer.LastErrorMs = int64(row.last_error_ms)
	}
	stat.Consumers = append(stat.Consumers, consumer)
}

//export wharfGoStatLane
func wharfGoStatLane(ctx unsafe.Pointer, row *C.wharf_stat_lane) {
	stat := cellValue(ctx).(*Stat)
	if len(stat.Consumers) == 0 {
		return // a lane row always follows its consumer's row
	}
	consumer := &stat.Consumers[len(stat.Consumers)-1]
	consumer.Lanes = append(consumer.Lanes, StatLane{uint32(row.partition), row.has_cursor != 0,
		uint64(row.fact_id), uint64(row.epoch), uint64(row.lag_facts), uint64(row.facts_behind),
		int64(row.oldest_commit_ms)})
}
