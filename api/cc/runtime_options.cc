// Parsing of runtime option strings ("instance=a;workers=2;..."), shared by the C ABI and CLI.
#include <charconv>

#include "engine/base/option_string.h"
#include "engine/declarative/model.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

Status ParseU32(std::string_view key, std::string_view value, uint32_t min, uint32_t* out) {
  uint32_t parsed = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || parsed < min) {
    return Status::InvalidArgument("option '" + std::string(key) + "': '" + std::string(value) +
                                   "' is not an integer >= " + std::to_string(min));
  }
  *out = parsed;
  return Status::OK();
}

Status ParseOne(std::string_view key, std::string_view value, RuntimeOptions* o) {
  if (key == "instance") {
    if (value.empty()) return Status::InvalidArgument("option 'instance' is empty");
    o->instance = value;
    return Status::OK();
  }
  if (key == "assignment") {
    if (value == "consistent_hash") {
      o->assignment = Assignment::kConsistentHash;
    } else if (value == "round_robin") {
      o->assignment = Assignment::kRoundRobin;
    } else {
      return Status::InvalidArgument("option 'assignment': '" + std::string(value) +
                                     "' is not one of consistent_hash | round_robin");
    }
    return Status::OK();
  }
  if (key == "workers") {
    if (value == "false") {
      o->workers = 0;
      return Status::OK();
    }
    Status s = ParseU32(key, value, 0, &o->workers);
    if (s.ok() && o->workers > kWorkersMax) {
      s = Status::InvalidArgument("option 'workers': " + std::string(value) +
                                  " is above the limit of " + std::to_string(kWorkersMax));
    }
    return s;
  }
  struct Field {
    const char* name;
    uint32_t RuntimeOptions::*member;
    uint32_t min;
  };
  static constexpr Field kFields[] = {
      {"max_depth", &RuntimeOptions::max_depth, 1},
      {"lease_ms", &RuntimeOptions::lease_ms, 1},
      {"renew_ms", &RuntimeOptions::renew_ms, 1},
      {"cursor_persist_ms", &RuntimeOptions::cursor_persist_ms, 1},
      {"backoff_initial_ms", &RuntimeOptions::backoff_initial_ms, 1},
      {"backoff_max_ms", &RuntimeOptions::backoff_max_ms, 1},
      {"timer_tick_ms", &RuntimeOptions::timer_tick_ms, 1},
      {"lane_batches_in_flight", &RuntimeOptions::lane_batches_in_flight, 1},
  };
  for (const Field& field : kFields) {
    if (key == field.name) return ParseU32(key, value, field.min, &(o->*field.member));
  }
  if (key == "config") return declarative::LoadRuntimeOptions(std::string(value), o);
  return Status::InvalidArgument("unknown runtime option '" + std::string(key) + "'");
}

}  // namespace

Status ParseRuntimeOptions(std::string_view text, RuntimeOptions* options) {
  RuntimeOptions parsed = *options;
  Status s = internal::ForEachOption(text, [&](std::string_view key, std::string_view value) {
    return ParseOne(key, value, &parsed);
  });
  if (s.ok()) s = ValidateRuntimeOptions(parsed);
  if (s.ok()) *options = std::move(parsed);
  return s;
}

Status ValidateRuntimeOptions(const RuntimeOptions& options) {
  if (options.workers > kWorkersMax) {
    return Status::InvalidArgument("workers (" + std::to_string(options.workers) +
                                   ") is above the limit of " + std::to_string(kWorkersMax));
  }
  if (options.lane_batches_in_flight == 0 ||
      options.lane_batches_in_flight > kLaneBatchesInFlightMax) {
    return Status::InvalidArgument(
        "lane_batches_in_flight (" + std::to_string(options.lane_batches_in_flight) +
        ") must be between 1 and " + std::to_string(kLaneBatchesInFlightMax));
  }
  struct Interval {
    const char* name;
    uint32_t value;
  };
  for (const Interval& interval :
       {Interval{"lease_ms", options.lease_ms}, Interval{"renew_ms", options.renew_ms},
        Interval{"cursor_persist_ms", options.cursor_persist_ms},
        Interval{"backoff_initial_ms", options.backoff_initial_ms},
        Interval{"backoff_max_ms", options.backoff_max_ms},
        Interval{"timer_tick_ms", options.timer_tick_ms}}) {
    if (interval.value == 0) {
      return Status::InvalidArgument(std::string(interval.name) + " must be >= 1");
    }
  }
  if (options.renew_ms >= options.lease_ms) {
    return Status::InvalidArgument("renew_ms (" + std::to_string(options.renew_ms) +
                                   ") must be shorter than lease_ms (" +
                                   std::to_string(options.lease_ms) + ")");
  }
  if (options.backoff_initial_ms > options.backoff_max_ms) {
    return Status::InvalidArgument(
        "backoff_initial_ms (" + std::to_string(options.backoff_initial_ms) +
        ") must not be above backoff_max_ms (" + std::to_string(options.backoff_max_ms) + ")");
  }
  return Status::OK();
}

const char* ToString(ConsumerKind kind) {
  switch (kind) {
    case ConsumerKind::kProjection:
      return "projection";
    case ConsumerKind::kReaction:
      return "reaction";
    case ConsumerKind::kSubscriber:
      return "subscriber";
    case ConsumerKind::kTap:
      return "tap";
  }
  return "?";
}

}  // namespace wharf
