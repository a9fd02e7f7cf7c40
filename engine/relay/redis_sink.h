// RedisStreamsSink: relays facts to Redis Streams with XADD, pipelined (wharf/relay.h).
//
// Each fact becomes one entry of the stream its template names, with the explicit entry id
// "<fact id>-0": ids increase with fact ids, so a redelivered fact is refused by Redis as "equal
// or smaller than the target stream top item". Such a refusal is checked (XRANGE of that id): the
// entry is there (or was trimmed by MAXLEN ~) -> already published; it is not -> the stream moved
// past the fact without it (another writer, or a lost write), which is reported as rejected
// rather than passed in silence. Fields: fact_id, type, key, payload, partition, commit_ms,
// incarnation (16 hex digits; only for a fact of a restored database's incarnation, not 0), then
// one "h:NAME" field per header, in order.
//
// Incarnations (wharf/backup.h): a restored database hands out ids the original may already have
// published into the same stream, as other facts. So an entry found at the fact's id is a
// duplicate only when its incarnation field (absent: 0) is the fact's; a trimmed one only when the
// stream's first entry is of the fact's incarnation or of the one this database gives its id.
// Otherwise the fact is rejected with a message saying the stream holds that id from another
// incarnation: such a database must publish into new streams ({incarnation} in the template).
//
// A stream must receive its facts in increasing id order: without ordering=global the template
// must contain {partition} (each partition's lane has streams of its own), else Validate refuses.
//
// Thread safety: Publish may run on several lanes at once; each call uses a connection of its own
// from a pool (hiredis contexts are not thread-safe). Cancel (any thread) shuts the connections in
// use down, so that their blocked reads and writes fail at once; a connect in progress runs to
// its timeout, then the call gives up.
#pragma once

#include <string>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/relay/outcome_counters.h"
#include "engine/relay/relay_config.h"
#include "wharf/relay.h"

struct redisContext;

namespace wharf::internal {

class RedisStreamsSink : public RelaySink {
 public:
  explicit RedisStreamsSink(RelayConfig config);
  ~RedisStreamsSink() override;

  Status Validate(const std::string& relay_name, Ordering ordering) override;
  // Before any Publish (not concurrently with one).
  void SetIncarnations(const Incarnations& incarnations) override;
  void Publish(std::span<const Fact* const> facts, std::vector<PublishOutcome>* outcomes) override;
  Counters counters() const override;
  void Cancel() override;

 private:
  // An idle pooled connection, or a new one (authenticated), in use until Release. nullptr:
  // *error says why (also when Cancel was called since the Publish call began, at `cancels`).
  redisContext* Acquire(uint64_t cancels, std::string* error);
  // Back to the pool when `healthy` and not cancelled since `cancels`, else closed.
  void Release(redisContext* context, uint64_t cancels, bool healthy);
  // Sends the XADDs of facts [begin, end) pipelined and reads their replies into `outcomes`
  // (candidates: indices refused as not above the stream's top). False: the connection broke.
  bool SendChunk(redisContext* context, std::span<const Fact* const> facts, size_t begin,
                 size_t end, const std::vector<std::string>& streams,
                 std::vector<PublishOutcome>* outcomes, std::vector<size_t>* candidates);
  // Settles the candidates: duplicate if the stream holds (or trimmed) the entry, of the fact's
  // incarnation; else rejected.
  bool CheckCandidates(redisContext* context, std::span<const Fact* const> facts,
                       const std::vector<std::string>& streams,
                       const std::vector<size_t>& candidates,
                       std::vector<PublishOutcome>* outcomes);

  const RelayConfig config_;
  std::string host_;
  int port_ = 0;
  Incarnations incarnations_;  // set before any Publish, then only read
  Mutex mutex_;
  std::vector<redisContext*> idle_ WHARF_GUARDED_BY(mutex_);
  std::vector<redisContext*> busy_ WHARF_GUARDED_BY(mutex_);  // in use by Publish calls
  uint64_t cancels_ WHARF_GUARDED_BY(mutex_) = 0;             // Cancel calls so far
  OutcomeCounters counters_;
};

}  // namespace wharf::internal
