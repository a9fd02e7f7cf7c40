// GroupReader: reads the groups of a database from its group stream ("<stream>.groups", stream
// sequence == group number), in order, from a given group on: a standby following its primary,
// or a database restored from a snapshot catching up (each group then goes to ApplyGroup).
//
// Built on an ordered consumer (nats.c: js_SubscribeSync with Ordered) rather than js_GetMsg per
// sequence: the server pushes the groups (with flow control), so a reader that is behind catches
// up at the stream's speed instead of one request round trip per group, and one that is caught up
// is woken by the next group instead of polling. The consumer is ephemeral, in the server's
// memory, and keeps no state the reader needs: the reader knows the next group it wants and
// creates the consumer again from it whenever the old one cannot go on (the connection
// reconnected, e.g. after a server restart; heartbeats missed; a gap; messages dropped because
// the reader fell behind its pending limits). So a restart of the server costs a new consumer,
// never a group, and no group is returned twice or out of order.
//
// Memory: the consumer's buffered messages are bounded (pending_bytes_max, kPendingBytesMax by
// default); beyond them nats.c drops messages (NATS_SLOW_CONSUMER) and the reader starts again
// after the last group it returned.
//
// Thread safety: one thread calls Next at a time; last_known_sequence() from any thread.
// Errors: NotFound when the group asked for is no longer in the stream (below its first sequence:
// dropped by its byte limit or purged; the copy must start from a newer snapshot) or the stream
// does not exist; Corruption when a message is not a group (headers missing or not matching its
// sequence) or a group is missing above the first sequence (a deleted message); IOError (retryable,
// subcode kTimedOut) when no group came within the timeout; IOError for NATS failures that do not
// heal within the timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/replicate/group.h"
#include "wharf/status.h"

struct __natsConnection;
struct __natsSubscription;
struct __jsCtx;

namespace wharf::internal {

class GroupReader {
 public:
  // Bytes the consumer may buffer before nats.c drops messages (then the reader starts again).
  static constexpr int64_t kPendingBytesMax = 64ll << 20;

  // `connection`: borrowed, must outlive the reader (nats.c reconnects it by itself). Reads the
  // groups of stream `stream` from group `from` (>= 1) on. `request_timeout_ms`: the wait of each
  // JetStream request (stream info, consumer creation; Next makes them again until its timeout).
  // `pending_bytes_max`: what the consumer may buffer (tests make it small).
  GroupReader(__natsConnection* connection, std::string stream, uint64_t from,
              uint32_t request_timeout_ms = 5000, int64_t pending_bytes_max = kPendingBytesMax);
  ~GroupReader();
  GroupReader(const GroupReader&) = delete;
  GroupReader& operator=(const GroupReader&) = delete;

  // The next group (number == next_number()), waiting up to `timeout_ms` for it.
  Status Next(uint32_t timeout_ms, Group* group);

  // The group the next Next returns.
  uint64_t next_number() const { return next_; }
  // The stream's last sequence (its newest group) as last learned: from the stream's state when
  // the consumer was created, then from each message (its sequence + the messages pending after
  // it). A standby's lag is last_known_sequence() - (next_number() - 1).
  uint64_t last_known_sequence() const { return last_known_.load(std::memory_order_relaxed); }
  // How many times the reader dropped its consumer and made another (a restart, dropped messages).
  uint64_t resets() const { return resets_; }
  // The stream's first and last sequences, asked of the server now.
  Status StreamSequences(uint64_t* first, uint64_t* last);

 private:
  // Creates the ordered consumer at next_ (after checking next_ was not purged).
  Status Subscribe();
  // Drops the consumer; the next Next creates another.
  void Drop();
  uint64_t Reconnects() const;
  // NotFound if next_ is below the stream's first sequence.
  Status CheckNotPurged(uint64_t first, uint64_t last);

  __natsConnection* const connection_;
  const std::string stream_;
  const std::string subject_;
  const uint32_t request_timeout_ms_;
  const int64_t pending_bytes_max_;
  __jsCtx* js_ = nullptr;
  __natsSubscription* subscription_ = nullptr;
  uint64_t resets_ = 0;                 // consumers dropped (see resets())
  uint64_t subscribed_reconnects_ = 0;  // the connection's reconnects when subscription_ began
  bool fresh_ = false;                  // subscription_ has delivered nothing yet
  uint64_t next_;
  std::atomic<uint64_t> last_known_{0};
};

}  // namespace wharf::internal
