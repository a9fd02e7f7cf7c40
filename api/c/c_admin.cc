// The C ABI's administration half: cursors, dead letters and leases (wharf.h, over wharf/admin.h).
#include "api/c/c_common.h"
#include "wharf/admin.h"

using wharf::Status;
using wharf::capi::CheckName;
using wharf::capi::CheckOut;
using wharf::capi::EngineState;
using wharf::capi::FindEngine;
using wharf::capi::Guard;

namespace {

// Bounds the id count a caller passes, so a garbage count is refused before it is read.
constexpr size_t kFactIdsCountMax = size_t{1} << 20;

Status CopyCursor(wharf_engine* engine, const char* from_consumer, const char* to_consumer,
                  uint8_t force) {
  std::shared_ptr<EngineState> state;
  std::string_view from;
  std::string_view to;
  Status s = FindEngine(engine, &state);
  if (s.ok()) s = CheckName(from_consumer, "from_consumer", &from);
  if (s.ok()) s = CheckName(to_consumer, "to_consumer", &to);
  if (s.ok() && force > 1) s = Status::InvalidArgument("force is neither 0 nor 1");
  if (!s.ok()) return s;
  return wharf::CopyCursor(*state->engine, from, to, force != 0);
}

}  // namespace

extern "C" {

wharf_status wharf_cursor_get(wharf_engine* engine, const char* consumer, uint32_t partition,
                              uint64_t* fact_id) {
  return Guard("wharf_cursor_get", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (s.ok()) s = CheckOut(fact_id, "fact_id");
    if (s.ok() && partition >= state->engine->partitions()) {
      s = Status::InvalidArgument("partition " + std::to_string(partition) +
                                  " is not below the partition count " +
                                  std::to_string(state->engine->partitions()));
    }
    if (!s.ok()) return s;
    uint64_t position = 0;
    s = wharf::GetCursor(*state->engine, name, partition, &position);
    if (s.ok()) *fact_id = position;
    return s;
  });
}

wharf_status wharf_cursor_copy(wharf_engine* engine, const char* from_consumer,
                               const char* to_consumer) {
  return Guard("wharf_cursor_copy",
               [&] { return CopyCursor(engine, from_consumer, to_consumer, 0); });
}

wharf_status wharf_cursor_copy_v2(wharf_engine* engine, const char* from_consumer,
                                  const char* to_consumer, uint8_t force) {
  return Guard("wharf_cursor_copy_v2",
               [&] { return CopyCursor(engine, from_consumer, to_consumer, force); });
}

wharf_status wharf_cursor_set(wharf_engine* engine, const char* consumer, uint64_t fact_id) {
  return Guard("wharf_cursor_set", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::SetCursor(*state->engine, name, fact_id);
  });
}

wharf_status wharf_cursor_delete(wharf_engine* engine, const char* consumer) {
  return Guard("wharf_cursor_delete", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::DeleteCursor(*state->engine, name);
  });
}

wharf_status wharf_cursor_list(wharf_engine* engine, wharf_cursor_fn fn, void* ctx) {
  return Guard("wharf_cursor_list", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::CursorInfo> cursors;
    s = wharf::ListCursors(*state->engine, &cursors);
    if (!s.ok()) return s;
    for (const wharf::CursorInfo& cursor : cursors) {
      fn(ctx, cursor.consumer.c_str(), cursor.partition, cursor.fact_id, cursor.epoch);
    }
    return Status::OK();
  });
}

wharf_status wharf_dead_letters(wharf_engine* engine, const char* consumer, wharf_dead_letter_fn fn,
                                void* ctx) {
  return Guard("wharf_dead_letters", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::DeadLetter> letters;
    s = wharf::ListDeadLetters(*state->engine, consumer == nullptr ? "" : consumer, &letters);
    if (!s.ok()) return s;
    for (const wharf::DeadLetter& letter : letters) {
      wharf::capi::ScopedFact view(letter.fact);
      fn(ctx, letter.consumer.c_str(), letter.reason.c_str(), view.get());
    }
    return Status::OK();
  });
}

wharf_status wharf_dead_purge(wharf_engine* engine, const char* consumer, const uint64_t* fact_ids,
                              size_t n_fact_ids, uint64_t* purged) {
  return Guard("wharf_dead_purge", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (s.ok() && fact_ids == nullptr && n_fact_ids != 0) {
      s = Status::InvalidArgument("fact_ids is NULL but n_fact_ids is " +
                                  std::to_string(n_fact_ids));
    }
    if (s.ok() && n_fact_ids > kFactIdsCountMax) {
      s = Status::InvalidArgument("n_fact_ids " + std::to_string(n_fact_ids) +
                                  " is above the limit of " + std::to_string(kFactIdsCountMax));
    }
    if (!s.ok()) return s;
    std::vector<uint64_t> ids(fact_ids, fact_ids + n_fact_ids);
    uint64_t count = 0;
    s = wharf::PurgeDeadLetters(*state->engine, name, ids, &count);
    if (s.ok() && purged != nullptr) *purged = count;
    return s;
  });
}

wharf_status wharf_lease_release(wharf_engine* engine, const char* consumer) {
  return Guard("wharf_lease_release", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::ReleaseLease(*state->engine, name);
  });
}

}  // extern "C"
