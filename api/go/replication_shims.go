package wharf

// C shims of replication.go: the report and state structs with their struct_size set before the
// call, as wharf.h's extensible structs want (in a file without //export, since cgo allows C
// definitions only there).

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

// Called from replication.go (declared there), hence not static.
wharf_status restore_from_stream_go(const char* options, const char* destination, uint8_t force,
                                    wharf_stream_restore_report* report) {
  report->struct_size = sizeof(*report);
  return wharf_restore_from_stream(options, destination, force, report);
}
wharf_status standby_state_go(wharf_standby* standby, wharf_standby_info* state) {
  state->struct_size = sizeof(*state);
  return wharf_standby_state(standby, state);
}
*/
import "C"
