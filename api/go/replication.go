package wharf

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

wharf_status restore_from_stream_go(const char* options, const char* destination, uint8_t force,
                                    wharf_stream_restore_report* report);
wharf_status standby_state_go(wharf_standby* standby, wharf_standby_info* state);
*/
import "C"

import "sync"

// Replication (wharf.h REPLICATION). A primary is an Engine opened with the options
// "replicate=nats://host:port,...;durability=replicated" (a commit returns once the NATS
// JetStream stream stored its group too). RestoreFromStream restores its database elsewhere;
// StartStandby keeps a copy following the stream, which Open(path, options with replicate)
// promotes. The old primary's next commit then fails with ErrPrimaryFenced.

// ErrPrimaryFenced matches a Conflict with SubcodePrimaryFenced: another copy of the database took
// its replication stream over, and this one commits nothing more (errors.Is(err, ErrConflict)
// holds for it too).
var ErrPrimaryFenced = &Error{Status: StatusConflict, Subcode: SubcodePrimaryFenced}

// StreamRestoreReport is what RestoreFromStream did.
type StreamRestoreReport struct {
	SnapshotID    string // the snapshot restored (16 hex digits)
	SnapshotGroup uint64 // the last group it held
	GroupsApplied uint64 // after it
	LastGroup     uint64 // the copy's last group: the stream's when the restore began
	LastFactID    uint64 // the copy's last fact id
	SnapshotBytes uint64
	DurationMs    int64
}

// RestoreFromStream restores the database replicated to the stream options names
// ("replicate=nats://...;replicate_stream=..."; credentials, TLS and replicate_timeout_ms are read
// too, other engine options ignored) into directory destination: the newest snapshot in the
// stream, then every group after it, so every commit the primary acknowledged under
// durability=replicated is there. Open(destination, "") opens it cut off from the stream;
// Open(destination, options with replicate) takes the stream over (the old primary is fenced).
// A destination that is not empty is refused (ErrInvalidArgument) unless force. ErrNotFound: no
// such stream or no snapshot in it; ErrIOError: NATS unreachable (the servers named) or files;
// ErrCorruption: a damaged snapshot file. Not from a handler.
func RestoreFromStream(options, destination string, force bool) (StreamRestoreReport, error) {
	if err := refuseInHandler("RestoreFromStream"); err != nil {
		return StreamRestoreReport{}, err
	}
	var args cArgs
	defer args.free()
	coptions := args.optional("options", options)
	cdestination := args.str("destination", destination)
	if args.err != nil {
		return StreamRestoreReport{}, args.err
	}
	cforce := C.uint8_t(0)
	if force {
		cforce = 1
	}
	var report C.wharf_stream_restore_report
	if err := call(func() C.wharf_status {
		return C.restore_from_stream_go(coptions, cdestination, cforce, &report)
	}); err != nil {
		return StreamRestoreReport{}, err
	}
	return StreamRestoreReport{
		SnapshotID:    C.GoString(&report.snapshot_id[0]),
		SnapshotGroup: uint64(report.snapshot_group),
		GroupsApplied: uint64(report.groups_applied),
		LastGroup:     uint64(report.last_group),
		LastFactID:    uint64(report.last_fact_id),
		SnapshotBytes: uint64(report.snapshot_bytes),
		DurationMs:    int64(report.duration_ms),
	}, nil
}

// StandbyState is where a Standby is.
type StandbyState struct {
	AppliedGroup  uint64 // the copy's last group
	StreamGroup   uint64 // the stream's last group, as last learned
	LastFactID    uint64 // of the last group applied
	LastAppliedMs int64  // wall clock of the last group applied (0: none yet)
	Error         string // the last error (the standby retries by itself), "" when none
}

// Standby is a warm copy of a replicated database in a directory, following the stream on a
// thread of the library's own. Its methods may be called from any goroutine. Close it once done.
type Standby struct {
	mu sync.RWMutex // Close waits for calls in progress; calls after it see c == nil
	c  *C.wharf_standby
}

// StartStandby starts a standby of the stream options names (as RestoreFromStream) in directory
// path: restored first when path is empty or missing, then applying every group the primary
// ships, as it comes. ErrInvalidArgument when path holds a database that is not a copy of the
// stream (a primary); otherwise the errors of RestoreFromStream. Not from a handler.
func StartStandby(options, path string) (*Standby, error) {
	if err := refuseInHandler("StartStandby"); err != nil {
		return nil, err
	}
	var args cArgs
	defer args.free()
	coptions := args.optional("options", options)
	cpath := args.str("path", path)
	if args.err != nil {
		return nil, args.err
	}
	var standby *C.wharf_standby
	if err := call(func() C.wharf_status {
		return C.wharf_standby_start(coptions, cpath, &standby)
	}); err != nil {
		return nil, err
	}
	return &Standby{c: standby}, nil
}

// with runs f with the standby's handle, or returns ErrClosed.
func (s *Standby) with(f func(*C.wharf_standby) C.wharf_status) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.c == nil {
		return &Error{Status: StatusClosed, Message: "the standby is closed"}
	}
	return call(func() C.wharf_status { return f(s.c) })
}

// State is where the standby is; after Stop, where it stopped. ErrClosed after Close.
func (s *Standby) State() (StandbyState, error) {
	var state C.wharf_standby_info
	var out StandbyState
	err := s.with(func(c *C.wharf_standby) C.wharf_status {
		status := C.standby_state_go(c, &state)
		if status == C.WHARF_OK {
			// The error text is lent until the next call on this thread: copied now.
			out = StandbyState{
				AppliedGroup:  uint64(state.applied_group),
				StreamGroup:   uint64(state.stream_group),
				LastFactID:    uint64(state.last_fact_id),
				LastAppliedMs: int64(state.last_applied_ms),
				Error:         C.GoString(state.error),
			}
		}
		return status
	})
	return out, err
}

// Stop stops following and closes the copy (it stays, up to the last group applied), so Open may
// open it. Idempotent; State still answers. Not from a handler.
func (s *Standby) Stop() error {
	if err := refuseInHandler("Standby.Stop"); err != nil {
		return err
	}
	return s.with(func(c *C.wharf_standby) C.wharf_status { return C.wharf_standby_stop(c) })
}

// Close stops the standby if it still runs and frees it. Idempotent. Not from a handler.
func (s *Standby) Close() error {
	if err := refuseInHandler("Standby.Close"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	// wharf_standby_free keeps a failure of its stop in wharf_last_error only: stop first to
	// return it.
	err := call(func() C.wharf_status { return C.wharf_standby_stop(s.c) })
	C.wharf_standby_free(s.c)
	s.c = nil
	return err
}
