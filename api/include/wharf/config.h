// Checking a declarative runtime file without opening anything: the diagnostics of
// every error, and, for a valid file, which guarantees each declared input establishes and why
// (what `wharf check` prints). Applying such a file is the `config=` option string of
// EngineOptions/RuntimeOptions (wharf/options.h, wharf/runtime.h).
//
// Ownership: the report is the caller's; CheckConfigFile replaces its contents.
// Thread safety: thread-safe (reads the file; no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wharf/status.h"

namespace wharf {

// One error, with its place in the file (1-based; 0: unknown).
struct ConfigDiagnostic {
  int line = 0;
  int column = 0;
  std::string message;
  std::string text;  // "file:line:column: message"
};

// A guarantee as the declaration of one input establishes it (or not).
struct ConfigProof {
  std::string guarantee;  // "delivery", "ordering", "serialization", "precedence"
  std::string outcome;    // "established", "failed" (claimed, not provable), "not_claimed"
  std::string scope;      // e.g. "at_least_once", "global", "per partition", "none"
  std::string reason;
};

// A relay the file declares (kind: relay), as bound to one input. Its secrets (user, password,
// token) are never part of the report.
struct ConfigRelay {
  std::string id;                  // consumer id (and cursor name)
  std::string broker;              // "redis_streams" | "nats_jetstream"
  std::string url;                 // e.g. "redis://127.0.0.1:6379"
  std::string target;              // the stream (Redis) or subject (NATS) template
  std::vector<std::string> types;  // the fact types it relays
  std::string order;               // "per partition", "global", "none"
  std::string reason;              // why, in a sentence
};

struct ConfigInput {
  std::string input;  // "<operation>/<input>"
  std::vector<std::string> consumers;
  std::vector<ConfigProof> proofs;
  std::vector<ConfigRelay> relays;  // the relays bound to the input, in declaration order
  uint32_t member_concurrency = 1;  // of the pool dispatching the input
};

struct ConfigReport {
  std::vector<ConfigDiagnostic> errors;  // ordered by line, then column
  bool has_runtime = false;              // the file has a `runtime` section
  // Valid, with a runtime section that declares inputs: the file gives the engine facts to use
  // (otherwise the engine uses its defaults). Only then are `inputs` filled.
  bool usable = false;
  std::vector<ConfigInput> inputs;  // one per declared input, in declaration order
};

// Parses and validates `file`, filling *report in every case.
//   OK               the file is valid (report->errors is empty)
//   InvalidArgument  a null report, or the file is not valid: the message lists every error, one
//                    per line (a missing or unreadable file is one such error)
Status CheckConfigFile(const std::string& file, ConfigReport* report);

}  // namespace wharf
