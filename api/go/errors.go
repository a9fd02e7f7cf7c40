package wharf

/*
#cgo pkg-config: wharf
#include <wharf.h>
*/
import "C"

import "fmt"

// Status is a wharf_status code of the C ABI.
type Status int

// The status codes (wharf.h); never renumbered.
const (
	StatusOK              Status = C.WHARF_OK
	StatusInvalidArgument Status = C.WHARF_INVALID_ARGUMENT
	StatusNotFound        Status = C.WHARF_NOT_FOUND
	StatusIOError         Status = C.WHARF_IO_ERROR
	StatusCorruption      Status = C.WHARF_CORRUPTION
	StatusBusy            Status = C.WHARF_BUSY
	StatusClosed          Status = C.WHARF_CLOSED
	StatusConflict        Status = C.WHARF_CONFLICT
	StatusNotSupported    Status = C.WHARF_NOT_SUPPORTED
	StatusInternal        Status = C.WHARF_INTERNAL
)

func (s Status) String() string { return C.GoString(C.wharf_errstr(C.wharf_status(s))) }

// The subcodes of Error.Subcode (wharf_subcode in wharf.h): what exactly a status means, where it
// can mean more than one thing. Never renumbered.
const (
	SubcodeNone           = int(C.WHARF_SUBCODE_NONE)
	SubcodeLeaseFenced    = int(C.WHARF_SUBCODE_LEASE_FENCED)    // Conflict: the lease moved
	SubcodeCursorMoved    = int(C.WHARF_SUBCODE_CURSOR_MOVED)    // Conflict: a cursor changed
	SubcodeDatabaseLocked = int(C.WHARF_SUBCODE_DATABASE_LOCKED) // IOError: another engine holds it
	SubcodeAlreadyExists  = int(C.WHARF_SUBCODE_ALREADY_EXISTS)  // InvalidArgument: target exists
	SubcodeTimedOut       = int(C.WHARF_SUBCODE_TIMED_OUT)       // IOError: no answer in time
	// Conflict: a key or range the transaction read was written since its snapshot (or the
	// snapshot is older than the engine keeps track of). Nothing was written: run the
	// transaction again from the start (Engine.Transact does).
	SubcodeReadConflict = int(C.WHARF_SUBCODE_READ_CONFLICT)
	// Conflict: another primary extended the replication stream; this database commits
	// nothing more (restore it from the stream, or follow it).
	SubcodePrimaryFenced = int(C.WHARF_SUBCODE_PRIMARY_FENCED)
)

// Error is a failed call: the status, its subcode (wharf_subcode) and the message that names the
// problem. Compare with errors.Is against the Err* values, which match on the status alone.
type Error struct {
	Status  Status
	Subcode int
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "wharf: " + e.Status.String()
	}
	return fmt.Sprintf("wharf: %s: %s", e.Status, e.Message)
}

// Is matches a sentinel: one without a subcode (ErrConflict) matches every *Error with its status,
// one with a subcode (ErrReadConflict) only those with that status and subcode.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status &&
		(t.Subcode == SubcodeNone || t.Subcode == e.Subcode)
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrIOError         = &Error{Status: StatusIOError}
	ErrCorruption      = &Error{Status: StatusCorruption}
	ErrBusy            = &Error{Status: StatusBusy}
	ErrClosed          = &Error{Status: StatusClosed}
	ErrConflict        = &Error{Status: StatusConflict}
	ErrNotSupported    = &Error{Status: StatusNotSupported} // e.g. a backup of a newer format
	// A commit refused because something the transaction read changed (SubcodeReadConflict);
	// errors.Is(err, ErrConflict) holds for it too.
	ErrReadConflict = &Error{Status: StatusConflict, Subcode: SubcodeReadConflict}
)

// check turns a status into an error, reading the thread's last error message. The caller must
// still be on the OS thread that made the call (see call).
func check(status C.wharf_status) error {
	if status == C.WHARF_OK {
		return nil
	}
	return &Error{
		Status:  Status(status),
		Subcode: int(C.wharf_last_subcode()),
		Message: C.GoString(C.wharf_last_error()),
	}
}
