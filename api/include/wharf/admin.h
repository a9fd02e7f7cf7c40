// Administration of a database: cursors and dead letters. Used by the CLI, the C ABI and tools.
// Every change goes through the engine's committer (with a compare-and-set where it replaces a
// cursor), so it is atomic and durable when OK is returned.
//
// Do not change the cursors of a consumer that a running runtime delivers: the runtime's next
// commit would be refused (Conflict) and it would reload the cursor, but a batch in flight may
// already have run its handlers.
//
// Thread safety: thread-safe (like Engine).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf {

struct CursorInfo {
  std::string consumer;
  uint32_t partition = 0;
  uint64_t fact_id = 0;  // last fact passed in this partition
  uint64_t epoch = 0;    // lease epoch of the last writer
};

struct DeadLetter {
  std::string consumer;
  std::string reason;
  Fact fact;
};

// All cursors, ordered by consumer then partition.
Status ListCursors(Engine& engine, std::vector<CursorInfo>* cursors);
// The consumer's position in a partition: the id of the last fact it passed, 0 if none.
Status GetCursor(Engine& engine, std::string_view consumer, uint32_t partition,
                 uint64_t* fact_id);
// Copies every partition's cursor of `from` to `to`. NotFound when `from` has none;
// InvalidArgument when `to` has cursors and !force.
Status CopyCursor(Engine& engine, std::string_view from, std::string_view to, bool force);
// Sets every partition's cursor of `consumer` to the last fact with id <= fact_id (0: start).
Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id);
// Deletes every cursor of `consumer`. NotFound when it has none.
Status DeleteCursor(Engine& engine, std::string_view consumer);

// Dead letters of `consumer` (empty: all), ordered by consumer then fact id.
Status ListDeadLetters(Engine& engine, std::string_view consumer, std::vector<DeadLetter>* out);

}  // namespace wharf
