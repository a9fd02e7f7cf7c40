// GroupSink: where the committer ships every group it writes when the database is replicated
// (engine/replicate implements it over NATS JetStream). The committer numbers groups for the
// stream (1, 2, ... across the database's whole life: the number is stored with the group, meta
// "replicated_group"), hands each one over right after it reached the WAL file, and is told back
// once the stream stored it. Kept here, an interface of the commit layer, so that the committer
// knows nothing of NATS.
#pragma once

#include <cstdint>
#include <string_view>

#include "wharf/status.h"

namespace wharf::internal {

// What the sink tells the committer, from the sink's own thread, in group order.
class GroupSinkListener {
 public:
  virtual ~GroupSinkListener() = default;
  // Every group numbered <= `number` is stored by the stream (acknowledged by its quorum).
  virtual void OnGroupsShipped(uint64_t number) = 0;
  // Group `number` will never be stored: another primary extended the stream (Conflict,
  // subcode kPrimaryFenced), or the stream holds another database. Nothing after it will be either.
  virtual void OnShipRefused(uint64_t number, const Status& why) = 0;
};

class GroupSink {
 public:
  virtual ~GroupSink() = default;
  // Called by the committer in group order (number = the previous call's + 1), with its write
  // lock held: queues the publish and returns (never waits for the stream). `bytes`: the group's
  // WriteBatch (StoreBatch::Data()), valid only during the call. `last_fact_id`: the
  // highest fact id written once this group is in. The sink keeps publishing a group until the
  // stream stores it (a retry carries the same message id, so it is never stored twice) or
  // refuses it for good.
  virtual void Ship(uint64_t number, std::string_view bytes, uint64_t last_fact_id) = 0;
  // Bytes queued and not yet acknowledged by the stream (the committer bounds them).
  virtual uint64_t pending_bytes() const = 0;
};

}  // namespace wharf::internal
