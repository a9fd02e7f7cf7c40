// HandlerScope: what a handler call can reach on its own thread — the slot SetFailureReason writes
// to and the attempt DeliveryAttempt() reads — for the duration of the call.
#pragma once

#include <cstdint>
#include <string>

#include "wharf/runtime.h"

namespace wharf::internal {

// The reason slot and attempt of the handler call running on this thread (null / 0: none).
extern thread_local std::string* t_failure_reason;
extern thread_local uint32_t t_delivery_attempt;

class HandlerScope {
 public:
  HandlerScope(std::string* reason_slot, uint32_t attempt) {
    t_failure_reason = reason_slot;
    t_delivery_attempt = attempt;
  }
  ~HandlerScope() {
    t_failure_reason = nullptr;
    t_delivery_attempt = 0;
  }
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;
};

// A reason as traced and stored: at most kFailureReasonBytesMax bytes, on one line (control
// characters become spaces, so log lines and `wharf dead list` rows stay whole).
inline std::string Bounded(std::string text) {
  if (text.size() > kFailureReasonBytesMax) text.resize(kFailureReasonBytesMax);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text;
}

}  // namespace wharf::internal
