// Fact: one message of the outbox, as read back by consumers and tools.
#pragma once

// The C++ API needs C++20 or later (wharf++.pc and the CMake target wharf::wharf++ require it
// without choosing the standard): say so before the first C++20 construct fails.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "wharf/*.h (the C++ API) needs C++20 or later (-std=c++20); C programs use wharf.h"
#endif

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
  // The payload's version as delivered: consumers receive every fact at its type's declared
  // version (Engine::DeclareType), upcast from the stored one (Engine::RegisterUpcaster).
  uint32_t v = 1;
  uint32_t stored_v = 1;  // the payload's version as stored (the producer emitted it at this one)
  uint32_t depth = 0;  // cascade depth: 0 for application commits, trigger depth + 1 in reactions
  // Wall clock (ms since the epoch) when the transaction that emitted it committed: read
  // once per transaction by the committer as it assigns the transaction its ids and writes it to
  // the log, just before the sync that makes it durable (so at most one sync round, typically
  // well under a millisecond, before Commit() returns). Not the time of Emit. A delayed fact
  // keeps the commit time of the transaction that scheduled it.
  int64_t commit_ms = 0;
  int64_t deliver_at_ms = 0;  // for delayed facts, when it was due; 0 otherwise
  // For a delayed fact (deliver_at_ms > 0): the id Commit() returned for it (CommitResult), under
  // which it waited as a timer. When due it is released into the outbox at a new position, `id`,
  // so that ids keep growing in delivery order; a producer correlates through scheduled_id.
  // 0 for a fact that was not delayed (its id is the one Commit() returned).
  uint64_t scheduled_id = 0;
};

// A declared fact type (Engine::DeclareType).
struct DeclaredType {
  std::string name;
  uint32_t version = 1;        // producers emit at most this version; consumers receive it
  uint32_t first_version = 1;  // the version it was first declared at: the oldest its facts have
};

// A state table declared above version 1 (Engine::DeclaredTables), or one to declare when the
// engine opens (EngineOptions::tables). Here, not in engine.h, so that options.h can hold it.
struct DeclaredTable {
  std::string name;
  uint32_t version = 1;
};

}  // namespace wharf
