package wharf

// Internals the tests of package wharf_test reach (compiled into the package by `go test` only).

// RunHandler is runHandler: the outcome and reason of one handler call, without an engine.
var RunHandler = runHandler

// OutcomeError is an error choosing outcome, as Reject and RetryLater make (with any outcome, so
// that a test can try one neither makes).
func OutcomeError(outcome Outcome, err error) error { return &outcomeError{outcome, err} }

// LiveCells is how many Go values handed to C as a callback's ctx are not released yet.
func LiveCells() int64 { return liveCells.Load() }
