package wharf

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status commit_async_go(wharf_txn* txn, void* ctx);
*/
import "C"

import (
	"context"
	"runtime"
	"unsafe"
)

// Txn holds state writes and emitted facts that commit all together or not at all. It is used
// by one goroutine at a time and ends with exactly one of Commit or Abort.
type Txn struct {
	c        *C.wharf_txn
	engine   *Engine // nil for a handler's effects
	scanning int     // > 0 while its own Scan runs: it may be read, not ended (wharf_row_fn)
}

// Begin starts a transaction.
func (e *Engine) Begin() (*Txn, error) {
	var txn *C.wharf_txn
	err := e.with(func(c *C.wharf_engine) C.wharf_status { return C.wharf_txn_begin(c, &txn) })
	if err != nil {
		return nil, err
	}
	return &Txn{c: txn, engine: e}, nil
}

func (t *Txn) live() error {
	if t.c == nil {
		return &Error{Status: StatusInvalidArgument, Message: "the transaction has ended"}
	}
	return nil
}

// Put writes value under key in state table table (created on first write).
func (t *Txn) Put(table string, key, value []byte) error {
	if err := t.live(); err != nil {
		return err
	}
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return args.err
	}
	err := call(func() C.wharf_status {
		return C.wharf_txn_put(t.c, ctable, bytesPtr(key), C.size_t(len(key)), bytesPtr(value),
			C.size_t(len(value)))
	})
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return err
}

// Delete removes key from state table table (an absent key is not an error).
func (t *Txn) Delete(table string, key []byte) error {
	if err := t.live(); err != nil {
		return err
	}
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return args.err
	}
	err := call(func() C.wharf_status {
		return C.wharf_txn_delete(t.c, ctable, bytesPtr(key), C.size_t(len(key)))
	})
	runtime.KeepAlive(key)
	return err
}

// Emit adds a fact of a declared type, partitioned by key (may be empty). The payload must not be
// empty.
func (t *Txn) Emit(factType string, key, payload []byte) error {
	if err := t.live(); err != nil {
		return err
	}
	var args cArgs
	defer args.free()
	ctype := args.str("fact type", factType)
	if args.err != nil {
		return args.err
	}
	err := call(func() C.wharf_status {
		return C.wharf_txn_emit(t.c, ctype, bytesPtr(key), C.size_t(len(key)), bytesPtr(payload),
			C.size_t(len(payload)))
	})
	runtime.KeepAlive(key)
	runtime.KeepAlive(payload)
	return err
}

// Get reads key as of the transaction's snapshot (taken at its first read, Get or Scan),
// overlaid with its own writes, and records the read: Commit fails with ErrReadConflict when a
// key it read (an absent one too) was written by another commit after the snapshot (run it
// again: Engine.Transact does). It does not wait for durability; a Commit that succeeds proves
// what it read durable. On a handler's effects it reads state as the handler's batch sees it:
// committed state overlaid with the effects written so far in the batch, by earlier facts of the
// same batch and by this handler call (a failed fact's effects are discarded: not seen), so a
// read-modify-write projection is exact at any batch_facts; a batch whose reads another writer
// changed is refused and delivered again (wharf_txn_get in wharf.h).
func (t *Txn) Get(table string, key []byte) ([]byte, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	var args cArgs
	defer args.free()
	ctable := args.str("table", table)
	if args.err != nil {
		return nil, args.err
	}
	var value unsafe.Pointer
	var length C.size_t
	err := call(func() C.wharf_status {
		return C.wharf_txn_get(t.c, ctable, bytesPtr(key), C.size_t(len(key)), &value, &length)
	})
	runtime.KeepAlive(key)
	if err != nil {
		return nil, err
	}
	defer C.wharf_free(value)
	return C.GoBytes(value, C.int(length)), nil
}

// Commit blocks until the transaction is durable and returns the id of the last fact it emitted
// (0 when none). The transaction ends in every case. ErrReadConflict (Subcode
// SubcodeReadConflict): something it read was written since its snapshot; nothing was written.
// An error other than ErrInvalidArgument, ErrBusy and ErrClosed leaves the outcome unknown: after
// recovery it is there entirely or not.
func (t *Txn) Commit() (uint64, error) {
	if err := t.committable(); err != nil {
		return 0, err
	}
	var last C.uint64_t
	txn := t.c
	t.c = nil
	// A transaction stays a valid handle after its engine closed (its commit returns ErrClosed
	// and frees it), so it needs no lock against Engine.Close.
	err := call(func() C.wharf_status { return C.wharf_txn_commit(txn, &last) })
	return uint64(last), err
}

// CommitContext is Commit bounded by ctx. When ctx has ended before the call, the transaction is
// aborted (nothing is written) and ctx.Err() returned. When ctx ends while the commit is in the
// committer's hands, CommitContext returns ctx.Err() at once and the commit goes on: its outcome
// is then unknown to the caller, as after an I/O error (it is applied entirely or not at all,
// never in part; read the state back to know). The transaction ends in every case.
func (t *Txn) CommitContext(ctx context.Context) (uint64, error) {
	if ctx.Done() == nil {
		return t.Commit()
	}
	if err := t.committable(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		t.Abort()
		return 0, err
	}
	result := make(chan commitResult, 1) // the callback never waits for the reader
	cell := newCell(result)
	txn := t.c
	t.c = nil
	if err := call(func() C.wharf_status { return C.commit_async_go(txn, cell) }); err != nil {
		freeCell(cell) // the callback is never called when the hand-over fails
		return 0, err
	}
	select {
	case r := <-result:
		return r.last, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// commitResult is the outcome of an asynchronous commit, sent by wharfGoCommitted.
type commitResult struct {
	last uint64
	err  error
}

//export wharfGoCommitted
func wharfGoCommitted(ctx unsafe.Pointer, status C.wharf_status, last C.uint64_t) {
	result := cellValue(ctx).(chan commitResult)
	freeCell(ctx) // called exactly once
	// On the engine thread that runs the callback, wharf_last_error is the commit's message.
	result <- commitResult{uint64(last), check(status)}
}

// committable is nil when Commit may hand the transaction to the committer.
func (t *Txn) committable() error {
	if err := t.live(); err != nil {
		return err
	}
	if t.engine == nil {
		return &Error{Status: StatusInvalidArgument,
			Message: "a handler's effects commit with the handler's outcome, not with Commit"}
	}
	if t.scanning > 0 {
		// The library refuses it and keeps the transaction: it must stay this Txn's.
		return &Error{Status: StatusInvalidArgument,
			Message: "Commit from the transaction's own Scan function (commit once Scan returned)"}
	}
	return nil
}

// Abort discards the transaction. Aborting an ended transaction is a no-op, and so is Abort from
// the transaction's own Scan function (abort once Scan returned).
func (t *Txn) Abort() {
	if t.c == nil || t.engine == nil || t.scanning > 0 {
		return
	}
	C.wharf_txn_abort(t.c)
	t.c = nil
}
