// W7-relay on Wharf: facts loaded like W2's (W1's shape, 16 producers x 100 facts, durable), then
// per broker and run a fresh broker for the reference (bench/reference_broker_ingest.h) and a
// fresh one for Wharf's relay (Runtime::Relay with the default relay options, draining a copy of
// the loaded database).
#pragma once

#include <string>

#include "bench/w7_shape.h"

namespace wharf::bench {

// In `dir` (which must be empty): commits `facts` facts (rounded up to whole transactions) and
// reads them back into *entries (what the reference publishes). Sets *seconds. Returns "" or an
// error.
std::string LoadW7(const std::string& dir, uint64_t facts, W7Facts* entries, double* seconds);

// One run for `broker`: the reference into a fresh broker, and Wharf's relay (`workers` runtime
// workers) from a copy of `loaded_dir` into another; `relay_first` orders them (runs alternate).
// `relay_options` ("key=value;...", may be empty): batch_facts for the relay consumer, any other
// key for its sink (e.g. in_flight). Everything it writes goes under `scratch_root`.
W7Measurement RunW7Once(W7Broker broker, const std::string& loaded_dir, const W7Facts& entries,
                        int workers, const std::string& relay_options, bool relay_first,
                        const std::string& scratch_root);

}  // namespace wharf::bench
