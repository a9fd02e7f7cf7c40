// DurableListener: the one way to learn which facts became durable. The committer tells its
// listener (the engine core, which fans the notice out to every attached runtime) after each
// group's sync round, before the group's waiters are acknowledged.
//
// (io::DurabilityObserver is a different thing: the file-system hook that learns which bytes of
// which file an fdatasync covered, for the fault-injecting file system of the tests.)
//
// Thread safety: called on the sync backend's thread (or the committer's, in buffered mode, or an
// inline committer's), one notice at a time and in LSN order; implementations must be quick.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace wharf::internal {

// A fact that just became durable. `record` views into the committed transaction and is valid
// during the call only; it is exactly the sealed record the producer encoded in this process.
struct DurableFact {
  uint64_t lsn;
  uint32_t partition;
  std::string_view record;  // sealed (see codec::DecodeFact)
};

class DurableListener {
 public:
  virtual ~DurableListener() = default;
  // Every fact with lsn <= durable_lsn is durable; `facts` are those of this notice (timers,
  // which are not in the outbox yet, are left out).
  virtual void OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) = 0;
  // After recovery from a failed write, facts up to `durable_lsn` may be durable without having
  // been announced (their commits reported an unknown outcome): caches must not assume they saw
  // every durable fact.
  virtual void OnGap(uint64_t durable_lsn) = 0;
  // False while nobody would look at the facts: the committer then does not list them.
  virtual bool Listening() const { return true; }
};

}  // namespace wharf::internal
