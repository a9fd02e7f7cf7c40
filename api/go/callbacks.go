package wharf

// Functions called by the C library (through the shims of shims.go) on its threads.

/*
#include <stdlib.h>
#include <wharf.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

//export wharfGoFact
func wharfGoFact(ctx unsafe.Pointer, fact *C.wharf_fact) {
	cellValue(ctx).(func(*Fact))(copyFact(fact))
}

//export wharfGoProject
func wharfGoProject(ctx unsafe.Pointer, fact *C.wharf_fact, effects *C.wharf_txn) C.wharf_outcome {
	handler := cellValue(ctx).(ProjectFunc)
	return deliver(fact, func(f *Fact) error { return handler(f, &Txn{c: effects}) })
}

//export wharfGoSubscribe
func wharfGoSubscribe(ctx unsafe.Pointer, fact *C.wharf_fact) C.wharf_outcome {
	handler := cellValue(ctx).(SubscribeFunc)
	return deliver(fact, handler)
}

//export wharfGoDestroy
func wharfGoDestroy(ctx unsafe.Pointer) { freeCell(ctx) }

// deliver runs a handler and turns what it returned (or a panic) into an outcome, giving the
// runtime the error's text as the failure's reason (trace events, dead letters).
func deliver(fact *C.wharf_fact, handler func(*Fact) error) (outcome C.wharf_outcome) {
	defer func() {
		if p := recover(); p != nil {
			setReason(fact, fmt.Sprintf("panic: %v", p))
			outcome = C.WHARF_FAILED
		}
	}()
	err := handler(copyFact(fact))
	if err == nil {
		return C.WHARF_HANDLED
	}
	setReason(fact, err.Error())
	var chosen *outcomeError
	if errors.As(err, &chosen) {
		return C.wharf_outcome(chosen.outcome)
	}
	return C.WHARF_FAILED
}

func setReason(fact *C.wharf_fact, reason string) {
	creason := C.CString(reason)
	defer C.free(unsafe.Pointer(creason))
	C.wharf_handler_reason(fact, creason)
}
