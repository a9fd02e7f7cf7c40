// fact_copy.h: a fact copied out of its borrowed wharf_fact view (valid only during the callback
// that received it), so that it can cross to the JavaScript thread, and its JavaScript form.
#ifndef WHARF_NODE_FACT_COPY_H_
#define WHARF_NODE_FACT_COPY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "napi_util.h"

namespace wharf_node {

struct FactCopy {
  uint64_t id = 0;
  std::string type;
  std::string key;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;  // name, value bytes
  std::string source;
  uint32_t version = 0;
  uint32_t stored_version = 0;
  uint32_t depth = 0;
  uint32_t partition = 0;
  int64_t commit_ms = 0;
  int64_t deliver_at_ms = 0;
  uint64_t scheduled_id = 0;
  uint32_t attempt = 0;

  // Copies `fact` (BORROWED for the call); `attempt` from wharf_fact_attempt or the dead letter's.
  static FactCopy From(const wharf_fact* fact, uint32_t attempt);
};

// { id, type, key, payload, headers, source, v, storedV, depth, partition, commitMs,
//   deliverAtMs, scheduledId, attempt }: bytes as Buffers, headers as { name: Buffer }.
napi_value FactToJs(napi_env env, const FactCopy& fact);

}  // namespace wharf_node

#endif  // WHARF_NODE_FACT_COPY_H_
