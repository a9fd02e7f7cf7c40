package wharf

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status scan_go(wharf_engine* engine, const char* table, const void* prefix,
                     size_t prefix_len, const void* from, size_t from_len, const void* to,
                     size_t to_len, size_t limit, void* ctx, size_t* rows, uint8_t* more);
wharf_status txn_scan_go(wharf_txn* txn, const char* table, const void* prefix,
                         size_t prefix_len, const void* from, size_t from_len, const void* to,
                         size_t to_len, size_t limit, void* ctx, size_t* rows, uint8_t* more);
*/
import "C"

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// ScanLimitMax is the most rows one Scan call visits (ScanOptions.Limit); longer walks continue
// from ScanResult.ResumeFrom.
const ScanLimitMax = 100000

// ScanOptions selects the rows of one state table a Scan visits: every key that starts with
// Prefix (nil: any key), at or above From (nil: from the table's first key) and below To (nil: to
// its end), in key order (keys compare as unsigned bytes), at most Limit rows (1..ScanLimitMax;
// 0 and anything above are ErrInvalidArgument).
type ScanOptions struct {
	Prefix []byte
	From   []byte
	To     []byte
	Limit  int
}

// ScanResult says what a Scan visited and where to resume.
type ScanResult struct {
	Rows int // rows handed to fn (the one it stopped at included)
	// More is true when rows of the range remain after the last one handed to fn (the limit was
	// reached, or fn returned false): scan again with From = ResumeFrom to continue.
	More       bool
	ResumeFrom []byte // when More: the last key handed to fn followed by a 0x00 byte
}

// Scan visits the rows of state table table in the range opts selects, from one snapshot of
// durable state (as Get: it waits for commits whose sync is in flight before the first row),
// calling fn with each row in key order until fn returns false or opts.Limit rows were visited.
// key and value are fn's own copies. Not part of any transaction: not validated. fn runs on the
// calling goroutine; a panic in fn ends the scan and is raised again from Scan, once the library
// let go of the scan (runtime.Goexit in fn ends the process: it cannot cross the C library, see
// SubscribeFunc). ErrInvalidArgument: a bad table name (a NUL byte, not UTF-8), From not below To,
// a bad limit, a nil fn.
func (e *Engine) Scan(table string, opts ScanOptions, fn func(key, value []byte) bool) (ScanResult, error) {
	return scan(table, opts, fn, func(ctable *C.char, args scanArgs) error {
		return e.with(func(c *C.wharf_engine) C.wharf_status {
			return C.scan_go(c, ctable, args.prefix, args.prefixLen, args.from, args.fromLen, args.to,
				args.toLen, args.limit, args.ctx, args.rows, args.more)
		})
	})
}

// Scan is Engine.Scan within the transaction (also a handler's effects): as of the transaction's
// snapshot, overlaid with its own writes. The range visited (up to the last row handed to fn, or
// the whole range when it was exhausted) is recorded: a commit after the snapshot that inserts,
// changes or deletes a key in it makes this transaction's Commit fail with ErrReadConflict (no
// phantoms). fn may read the transaction (Get, Scan) but not change or end it: Put, Delete,
// Emit and Commit of it from fn return ErrInvalidArgument, Abort does nothing. Errors as
// Engine.Scan; ErrInvalidArgument also when the transaction has ended.
func (t *Txn) Scan(table string, opts ScanOptions, fn func(key, value []byte) bool) (ScanResult, error) {
	if err := t.live(); err != nil {
		return ScanResult{}, err
	}
	t.scanning++
	defer func() { t.scanning-- }()
	return scan(table, opts, fn, func(ctable *C.char, args scanArgs) error {
		return call(func() C.wharf_status {
			return C.txn_scan_go(t.c, ctable, args.prefix, args.prefixLen, args.from, args.fromLen,
				args.to, args.toLen, args.limit, args.ctx, args.rows, args.more)
		})
	})
}

// scanArgs are the C arguments of one scan call besides the table.
type scanArgs struct {
	prefix, from, to          unsafe.Pointer
	prefixLen, fromLen, toLen C.size_t
	limit                     C.size_t
	ctx                       unsafe.Pointer
	rows                      *C.size_t
	more                      *C.uint8_t
}

// scanState is a scan in progress, reached by wharfGoRow through a cell.
type scanState struct {
	fn         func(key, value []byte) bool
	rows       int
	lastKey    []byte
	panicked   bool
	panicValue any
}

func scan(table string, opts ScanOptions, fn func(key, value []byte) bool,
	run func(*C.char, scanArgs) error) (ScanResult, error) {
	if fn == nil {
		return ScanResult{}, &Error{Status: StatusInvalidArgument, Message: "the scan's row function is nil"}
	}
	if opts.Limit < 0 {
		return ScanResult{}, &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("scan limit %d is not in 1..%d", opts.Limit, ScanLimitMax)}
	}
	var cargs cArgs
	defer cargs.free()
	ctable := cargs.str("table", table)
	if cargs.err != nil {
		return ScanResult{}, cargs.err
	}
	state := &scanState{fn: fn}
	cell := newCell(state)
	defer freeCell(cell)
	var rows C.size_t
	var more C.uint8_t
	err := run(ctable, scanArgs{
		prefix: bytesPtr(opts.Prefix), prefixLen: C.size_t(len(opts.Prefix)),
		from: bytesPtr(opts.From), fromLen: C.size_t(len(opts.From)),
		to: bytesPtr(opts.To), toLen: C.size_t(len(opts.To)),
		limit: C.size_t(opts.Limit), ctx: cell, rows: &rows, more: &more,
	})
	runtime.KeepAlive(opts)
	if state.panicked {
		// Raised here, on the caller's goroutine: a panic must not unwind through the library's
		// frames (they would never release the scan).
		panic(state.panicValue)
	}
	if err != nil {
		return ScanResult{}, err
	}
	result := ScanResult{Rows: state.rows, More: more != 0}
	if result.More && state.lastKey != nil {
		result.ResumeFrom = append(append([]byte(nil), state.lastKey...), 0)
	}
	return result, nil
}

//export wharfGoRow
func wharfGoRow(ctx unsafe.Pointer, key unsafe.Pointer, keyLen C.size_t, value unsafe.Pointer,
	valueLen C.size_t) C.int {
	state := cellValue(ctx).(*scanState)
	returned := false
	defer func() {
		if !returned {
			exitOnGoexit() // see runHandler: only runtime.Goexit leaves visit without returning
		}
	}()
	stop := state.visit(C.GoBytes(key, C.int(keyLen)), C.GoBytes(value, C.int(valueLen)))
	returned = true
	return stop
}

// visit hands one row to fn: 0 to go on, 1 to stop (fn returned false, or panicked: the panic is
// kept for scan to raise again).
func (s *scanState) visit(key, value []byte) (stop C.int) {
	stop = 1
	returned := false
	defer func() {
		p := recover()
		if !returned {
			s.panicked = true
			s.panicValue = p
		}
	}()
	goOn := s.fn(key, value)
	returned = true
	s.rows++
	s.lastKey = key
	if goOn {
		return 0
	}
	return 1
}

// TransactOptions bound Engine.Transact's retries. A zero field takes its default.
type TransactOptions struct {
	AttemptsMax  int // attempts in all, the first one included (default 16)
	BackoffMinMs int // default 1
	BackoffMaxMs int // default 100
}

// Transact runs fn in a new transaction and commits it, and returns the id of the last fact the
// committed attempt emitted (0 when none). When the commit fails with ErrReadConflict (something
// fn read changed meanwhile) it runs fn again in another new transaction, up to AttemptsMax
// attempts, then returns that last ErrReadConflict. The first retry runs at once; before attempt
// n+1 >= 3 it sleeps a random time in [0, min(BackoffMaxMs, BackoffMinMs * 2^(n-2))] ms (full
// jitter, so that transactions that keep colliding spread out). This is the loop of
// wharf_transact and Engine::Transact, run in Go (fn then runs as plain Go code: its panics and
// runtime.Goexit unwind normally).
//
// fn must not commit or abort the transaction, and must be safe to run more than once: every
// attempt starts from nothing. An error fn returns ends Transact at once and is returned
// unchanged (the transaction aborted, nothing committed); a panic in fn aborts the transaction and
// goes on up the stack. Only fn returning nil and the commit succeeding count as success. Other
// commit errors are returned as Commit returns them (not retried: an I/O error's outcome is
// unknown). From a handler it is refused (ErrInvalidArgument).
func (e *Engine) Transact(fn func(*Txn) error, opts ...TransactOptions) (uint64, error) {
	return e.TransactContext(context.Background(), fn, opts...)
}

// TransactContext is Transact bounded by ctx: it returns ctx.Err() as soon as ctx ends, before
// an attempt (nothing of it written), during a backoff, or while an attempt's commit is in the
// committer's hands (its outcome then unknown, as with Txn.CommitContext: applied entirely or not
// at all). fn is not interrupted: pass it ctx yourself when it waits for something.
func (e *Engine) TransactContext(ctx context.Context, fn func(*Txn) error,
	opts ...TransactOptions) (uint64, error) {
	if err := refuseInHandler("Engine.Transact"); err != nil {
		return 0, err
	}
	if fn == nil {
		return 0, &Error{Status: StatusInvalidArgument, Message: "the transaction function is nil"}
	}
	if len(opts) > 1 {
		return 0, &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("Transact takes at most one TransactOptions, got %d", len(opts))}
	}
	o := TransactOptions{AttemptsMax: 16, BackoffMinMs: 1, BackoffMaxMs: 100}
	if len(opts) == 1 {
		given := opts[0]
		if given.AttemptsMax < 0 || given.BackoffMinMs < 0 || given.BackoffMaxMs < 0 {
			return 0, &Error{Status: StatusInvalidArgument,
				Message: fmt.Sprintf("TransactOptions %+v: a field is negative (0: its default)", given)}
		}
		if given.AttemptsMax > 0 {
			o.AttemptsMax = given.AttemptsMax
		}
		if given.BackoffMinMs > 0 {
			o.BackoffMinMs = given.BackoffMinMs
		}
		if given.BackoffMaxMs > 0 {
			o.BackoffMaxMs = given.BackoffMaxMs
		}
		if o.BackoffMinMs > o.BackoffMaxMs {
			return 0, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
				"TransactOptions: BackoffMinMs (%d) is above BackoffMaxMs (%d)", o.BackoffMinMs,
				o.BackoffMaxMs)}
		}
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		id, err, fromFn := e.attempt(ctx, fn)
		if err == nil || fromFn || !isReadConflict(err) || attempt >= o.AttemptsMax {
			return id, err
		}
		if attempt > 1 { // the first retry runs at once
			if err := sleep(ctx, backoff(attempt, o)); err != nil {
				return 0, err
			}
		}
	}
}

// sleep waits for d, or until ctx ends (then ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isReadConflict is the commit's refusal for a read that changed (the retried one).
func isReadConflict(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Status == StatusConflict && e.Subcode == SubcodeReadConflict
}

// attempt runs fn once in a new transaction and commits it. fromFn: the error is fn's own (even
// one that is a read conflict fn got elsewhere: it ends Transact, unchanged).
func (e *Engine) attempt(ctx context.Context, fn func(*Txn) error) (id uint64, err error,
	fromFn bool) {
	txn, err := e.Begin()
	if err != nil {
		return 0, err, false
	}
	// A panic or error of fn: nothing committed (a no-op after Commit).
	defer txn.Abort()
	if err := fn(txn); err != nil {
		return 0, err, true
	}
	if txn.c == nil {
		return 0, &Error{Status: StatusInvalidArgument,
			Message: "the transaction function committed or aborted its transaction (Transact commits it)"}, false
	}
	id, err = txn.CommitContext(ctx)
	return id, err, false
}

var jitter = struct {
	sync.Mutex
	*rand.Rand
}{Rand: rand.New(rand.NewSource(time.Now().UnixNano()))}

// backoff is the sleep before attempt+1 (attempt >= 2): uniform in
// [0, min(max, min * 2^(attempt-2))] ms.
func backoff(attempt int, o TransactOptions) time.Duration {
	ceiling := time.Duration(o.BackoffMaxMs) * time.Millisecond
	if shift := attempt - 2; shift < 31 {
		if grown := time.Duration(o.BackoffMinMs) * time.Millisecond << shift; grown < ceiling {
			ceiling = grown
		}
	}
	jitter.Lock()
	defer jitter.Unlock()
	return time.Duration(jitter.Int63n(int64(ceiling) + 1))
}
