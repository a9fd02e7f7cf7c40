// GroupStream: the committer's GroupSink over NATS JetStream. Every group the committer writes is
// published, in order, as one message of the stream `<stream>` (subject `<stream>.groups`), whose
// sequence is the group's number.
//
// The message: data = the group's WriteBatch bytes; headers
//   Nats-Msg-Id: <database id>:<group>:<writer>   (the duplicate window drops a retried publish)
//   Wharf-Database: <database id>   Wharf-Group: <n>   Wharf-Last-Fact-Id: <n>   Wharf-Format: <v>
//   Wharf-Term: <the primary's term, 32 hex>      (when Open was given one)
//   Nats-Expected-Last-Sequence: <n - 1>          (also for group 1: "0" is checked by the server)
//   Nats-Expected-Last-Msg-Id: <the id of group n - 1>   (when this writer published n - 1 and no
//                                                       resync came between; see below)
// <writer> is 16 hex digits drawn at Open: two primaries of one database (a copy restored and run
// as a primary too) never share a message id, so the duplicate window can never take one's group
// for the other's, and Expected-Last-Msg-Id can tell whose group n - 1 is.
//
// Order: one publisher thread owns it. It publishes the queued groups in order, up to a window
// (kWindowGroups, kWindowBytes) ahead of the acknowledgements; JetStream stores group n only on top
// of group n - 1 (the expected last sequence), and a pipelined group only on top of this writer's
// n - 1 (the expected last message id), so nothing is ever stored out of order or on top of
// another writer's group. Acknowledgements are matched to their groups (reply subject
// <inbox>.<epoch>.<group>, read by an acknowledgement thread) and reported to the listener as the
// highest contiguous stored group.
//
// Retries: any publish refused for a transient reason (no responders, JetStream unavailable, a
// leader election), refused as "wrong last sequence / message id", or unanswered within
// config.attempt_ms() makes the publisher *resync*: a new epoch (late replies of older ones are
// ignored), then the stream's last sequence L; each queued group <= L is looked up (the message at
// its sequence): our message id -> stored (a first attempt that succeeded though its reply was
// lost); anything else -> another primary extended the stream: OnShipRefused(n, Conflict "another
// primary extended stream ..."). Then publishing resumes at L + 1 with the same message ids. A
// resync that fails (no quorum, server down) is tried again after a back-off (50 ms doubling to
// 1 s), for as long as it takes: queued groups wait, pending_bytes grows (the committer bounds it).
// After a resync one group is published alone until the stream stores one (a probe): an outage
// costs one publish per timeout, not a window's worth.
//
// Bounded disk: the stream is created with MaxBytes = config.stream_bytes_max (discard old), so the
// servers drop its oldest groups by themselves (nats-server 2.9's purges cannot be used: a purge
// "below sequence 1" empties the stream, and a node recovering replays any purge as a full one,
// nats-server issues 4696 and 4196). What keeps that safe: every group is counted (its bytes,
// headers, subject and the store's per-message overhead, rounded up) from Ship on, and the
// publisher holds group n while the groups counted since the newest snapshot's base
// (SetRetainedBase) would exceed three quarters of the limit: the servers then only ever drop
// groups a snapshot covers. Held groups wait as groups do in an outage (held() says so; the
// replicator takes a snapshot at once). At Open everything the stream holds counts as uncovered.
//
// Refusals (OnShipRefused, then nothing more is published; later Ship calls are dropped):
//   Conflict (fenced): another writer's message at one of our group numbers.
//   IOError: the stream lost groups (its last sequence fell below a group it acknowledged: it was
//   deleted, recreated or purged), or it refused a group for good (e.g. larger than its limits).
//
// Open refuses (see Open) rather than start on a stream it cannot extend.
//
// Thread safety: Ship, pending_bytes and counters may be called from any thread (Ship by one at a
// time, in group order: the committer's). The listener is called from the publisher thread, never
// with a lock of this class held, possibly until Close returns; it must not call Close. Close
// (or the destructor) from any other thread; a second call does nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/commit/group_sink.h"
#include "engine/replicate/nats_link.h"
#include "engine/replicate/replicate_config.h"

struct __natsSubscription;

namespace wharf::internal {

class GroupStream final : public GroupSink {
 public:
  // Publishes ahead of the acknowledgements, at most (whichever comes first; at least one group).
  static constexpr size_t kWindowGroups = 128;
  static constexpr uint64_t kWindowBytes = 4ull << 20;

  struct Counters {
    uint64_t published = 0;         // publishes sent, retries included
    uint64_t retries = 0;           // publishes of a group sent before (after a resync)
    uint64_t resyncs = 0;           // resyncs (see the header comment), failed ones included
    uint64_t found_stored = 0;      // groups a resync found stored (their reply lost or late)
    uint64_t acked = 0;             // groups the stream stored, acknowledged
    uint64_t last_acked_group = 0;  // the highest contiguous stored group
    uint64_t pending_groups = 0;    // shipped, not yet acknowledged
    uint64_t pending_bytes = 0;
    uint64_t ack_latency_us = 0;  // from Ship to acknowledgement, moving average (1/8 weight)
  };

  // Connects (NatsLink), creates the stream `config.stream` if missing (file storage,
  // config.replicas, subject "<stream>.groups", duplicate window 2 min, no limits) and checks that
  // this database may extend it; then starts the threads. `local_last_group`: the last group the
  // local database holds (0: none yet); the next Ship must be its + 1. Cases (L = the stream's
  // last sequence):
  //   L == local_last_group (an empty stream and a new database included): OK.
  //   the last stored message's Wharf-Database is another's: InvalidArgument "stream \"X\" at URL
  //     holds another database's groups (database <theirs>, this one <ours>)".
  //   L > local_last_group: Conflict "the stream holds groups N+1..L this database does not have:
  //     another primary extended it; restore or follow it (standby) instead".
  //   L < local_last_group: IOError "stream \"X\" ... ends at group L but this database has
  //     groups up to N": the stream lost groups (deleted, recreated or purged), or this database
  //     wrote groups that never reached it (a crash before their acknowledgement).
  //   an unreachable URL / refused credentials / JetStream not answering: NatsLink's errors.
  // `listener` must outlive the GroupStream. `term_hex`: the primary's term, sent as the header
  // Wharf-Term on every group (none when empty).
  static Status Open(const ReplicateConfig& config, std::string database_id,
                     uint32_t format_version, uint64_t local_last_group,
                     GroupSinkListener* listener, std::unique_ptr<GroupStream>* stream,
                     std::string term_hex = "");
  GroupStream(const GroupStream&) = delete;
  GroupStream& operator=(const GroupStream&) = delete;
  ~GroupStream() override;  // Close()

  void Ship(uint64_t number, std::string_view bytes, uint64_t last_fact_id) override;
  // Shipped and not yet acknowledged; 0 once refused (nothing more will be published).
  uint64_t pending_bytes() const override { return pending_bytes_.load(); }
  Counters counters() const;

  // Bytes counted for every group shipped so far (see "Bounded disk"), the stream's contents at
  // Open included. Read it before a snapshot's checkpoint is taken: everything counted then is
  // in the checkpoint.
  uint64_t counted_bytes() const;
  // A snapshot holding everything counted up to `counted` (a counted_bytes() read before its
  // checkpoint) is in the stream: groups counted before it may be dropped by the stream's limit.
  // Wakes a held publisher. Any thread.
  void SetRetainedBase(uint64_t counted);
  // True while the publisher holds a group for a snapshot (see "Bounded disk").
  bool held() const { return held_.load(); }

  // Stops publishing and retrying, then frees the NATS objects; groups not yet acknowledged stay
  // unacknowledged (the listener hears nothing more). Safe while publishes are in flight: the
  // connection is closed first, which ends any request in progress at once.
  void Close();

  // The largest group the connected server takes in one message: its max_payload (1 MiB unless
  // configured) less kHeaderRoom for the headers. The committer must cut its groups below it; a
  // larger one is refused (OnShipRefused, IOError naming max_payload).
  uint64_t max_group_bytes() const { return max_group_bytes_; }
  static constexpr uint64_t kHeaderRoom = 1024;

  // "<stream>.groups".
  const std::string& subject() const { return subject_; }
  // The Nats-Msg-Id of group `number` as this GroupStream publishes it.
  std::string MsgId(uint64_t number) const;

 private:
  struct Group {
    uint64_t number = 0;
    std::string bytes;
    uint64_t last_fact_id = 0;
    std::chrono::steady_clock::time_point shipped_at;
    std::chrono::steady_clock::time_point sent_at;  // of the latest attempt
    uint64_t counted_through = 0;                   // counted_bytes() once this group was shipped
    uint32_t attempts = 0;                          // publishes sent
    bool in_flight = false;                         // sent in this epoch, no reply yet
    bool stored = false;
  };
  struct Reply {
    uint64_t epoch = 0;
    uint64_t number = 0;
    NatsPubAck ack;
  };

  GroupStream(std::unique_ptr<NatsLink> link, std::string database_id, uint32_t format_version,
              std::string term_hex, uint64_t last_group, uint64_t stream_bytes,
              GroupSinkListener* listener);
  // What a group of `bytes` counts for (see "Bounded disk").
  uint64_t CountedBytes(size_t bytes) const;
  Status Start();
  void RunPublisher();
  void RunAcks();
  // The publisher's steps (publisher thread only).
  void HandleReplies(const std::vector<Reply>& replies);
  void PublishWindow();
  void Publish(Group* group);
  // False: retry later (JetStream did not answer). Refuses (and returns true) when the stream
  // says so.
  bool Resync();
  void Refuse(uint64_t number, Status why);
  void ReportStored();
  std::chrono::steady_clock::time_point NextDeadline() const;

  std::unique_ptr<NatsLink> link_;  // reset by Close, once the threads are joined
  const std::string stream_;
  const std::string subject_;
  const std::string database_id_;
  const uint32_t format_version_;
  const std::string term_hex_;
  const std::string writer_;
  GroupSinkListener* const listener_;
  std::string inbox_;
  uint64_t max_group_bytes_ = 0;  // set by Start
  __natsSubscription* reply_subscription_ = nullptr;

  // Shared with Ship, the acknowledgement thread and Close.
  mutable Mutex mutex_;
  CondVar wake_;
  std::deque<Group> incoming_ WHARF_GUARDED_BY(mutex_);  // shipped, not yet taken by the publisher
  std::vector<Reply> replies_in_ WHARF_GUARDED_BY(mutex_);
  uint64_t counted_bytes_ WHARF_GUARDED_BY(mutex_) = 0;  // see "Bounded disk"
  uint64_t retained_base_ WHARF_GUARDED_BY(mutex_) = 0;  // counted_bytes_ a snapshot covers
  // SetRetainedBase since the publisher last looked.
  bool retained_moved_ WHARF_GUARDED_BY(mutex_) = false;
  bool closing_ WHARF_GUARDED_BY(mutex_) = false;
  bool refused_ WHARF_GUARDED_BY(mutex_) = false;
  uint64_t last_shipped_ WHARF_GUARDED_BY(mutex_) = 0;

  // The publisher thread's own.
  std::deque<Group> window_;  // groups reported_ + 1 .. in order, not yet reported stored
  uint64_t reported_ = 0;     // the highest contiguous stored group told to the listener
  uint64_t epoch_ = 1;
  uint64_t next_to_send_ = 1;  // the lowest group not stored and not in flight in this epoch
  size_t in_flight_groups_ = 0;
  uint64_t in_flight_bytes_ = 0;
  bool resync_needed_ = false;
  bool after_resync_ = true;  // the next publish expects no last message id (see header)
  bool probing_ = true;       // since the last resync, no group was stored: one in flight only
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point retry_at_;
  uint64_t retained_base_seen_ = 0;  // the publisher's copy of retained_base_

  std::atomic<uint64_t> pending_bytes_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> resyncs_{0};
  std::atomic<uint64_t> found_stored_{0};
  std::atomic<uint64_t> acked_{0};
  std::atomic<uint64_t> last_acked_group_{0};
  std::atomic<uint64_t> pending_groups_{0};
  std::atomic<uint64_t> ack_latency_us_{0};
  std::atomic<bool> held_{false};

  std::thread publisher_thread_;
  std::thread ack_thread_;
  std::once_flag closed_;
};

}  // namespace wharf::internal
