// Fact: one message of the outbox, as read back by consumers and tools.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wharf {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Fact {
  uint64_t id = 0;         // the LSN: strictly increasing across the database
  uint32_t partition = 0;  // xxh3(key) mod partitions (see Engine::PartitionOf)
  std::string type;
  std::string key;  // partition key bytes, may be empty
  std::string payload;
  Headers headers;
  std::string source;  // producer or consumer that emitted it ("" for application commits)
  uint32_t v = 1;      // schema version of the payload
  uint32_t depth = 0;  // cascade depth: 0 for application commits, trigger depth + 1 in reactions
  int64_t commit_ms = 0;      // wall clock when the commit was requested
  int64_t deliver_at_ms = 0;  // for delayed facts, when it was due; 0 otherwise
};

}  // namespace wharf
