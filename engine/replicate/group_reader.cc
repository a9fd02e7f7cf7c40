#include "engine/replicate/group_reader.h"

#include <nats/nats.h>

#include <chrono>
#include <thread>

#include "engine/base/assert.h"
#include "engine/replicate/js_util.h"
#include "engine/replicate/nats_link.h"

namespace wharf::internal {

namespace {

using Clock = std::chrono::steady_clock;

// How long one wait for a message lasts before the reader looks at the connection again (a
// reconnect since the consumer was created means the consumer must be created again).
constexpr auto kWaitSlice = std::chrono::milliseconds(200);
// The ordered consumer's idle heartbeat: nats.c reports its loss (NATS_MISSED_HEARTBEAT) after
// about two of them, and the reader then creates the consumer again.
constexpr int64_t kHeartbeatNs = 1'000'000'000;
// Between two attempts to create the consumer while NATS is unreachable.
constexpr auto kRetryPause = std::chrono::milliseconds(50);

}  // namespace

GroupReader::GroupReader(natsConnection* connection, std::string stream, uint64_t from,
                         uint32_t request_timeout_ms, int64_t pending_bytes_max)
    : connection_(connection),
      stream_(std::move(stream)),
      subject_(GroupSubject(stream_)),
      request_timeout_ms_(request_timeout_ms),
      pending_bytes_max_(pending_bytes_max),
      next_(from) {
  WHARF_ASSERT(connection_ != nullptr);
  WHARF_ASSERT(from >= 1);
}

GroupReader::~GroupReader() {
  Drop();
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

void GroupReader::Drop() {
  if (subscription_ == nullptr) return;
  // Unsubscribe deletes the consumer on the server (a request: only when connected, so that a
  // reader of a server that went away does not wait for it); otherwise the server deletes the
  // ephemeral consumer once it sees nobody reads it.
  if (natsConnection_Status(connection_) == NATS_CONN_STATUS_CONNECTED) {
    natsSubscription_Unsubscribe(subscription_);
  }
  natsSubscription_Destroy(subscription_);
  subscription_ = nullptr;
  ++resets_;
}

uint64_t GroupReader::Reconnects() const {
  natsStatistics* stats = nullptr;
  uint64_t reconnects = 0;
  if (natsStatistics_Create(&stats) == NATS_OK &&
      natsConnection_GetStats(connection_, stats) == NATS_OK) {
    natsStatistics_GetCounts(stats, nullptr, nullptr, nullptr, nullptr, &reconnects);
  }
  if (stats != nullptr) natsStatistics_Destroy(stats);
  return reconnects;
}

Status GroupReader::StreamSequences(uint64_t* first, uint64_t* last) {
  natsStatus s = NATS_OK;
  if (js_ == nullptr) {
    jsOptions options;
    jsOptions_Init(&options);
    options.Wait = request_timeout_ms_;
    s = natsConnection_JetStream(&js_, connection_, &options);
    if (s != NATS_OK) return Status::IOError("replicate: JetStream context: " + NatsText(s));
  }
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_GetStreamInfo(&info, js_, stream_.c_str(), nullptr, &code);
  if (s != NATS_OK) {
    if (code == JSStreamNotFoundErr) {
      return Status::NotFound("replicate: stream \"" + stream_ + "\" does not exist");
    }
    return Status::IOError("replicate: info of stream \"" + stream_ + "\": " + NatsText(s, code),
                           /*retryable=*/true);
  }
  *first = info->State.FirstSeq;
  *last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  return Status::OK();
}

Status GroupReader::CheckNotPurged(uint64_t first, uint64_t last) {
  if (first == 0 || next_ >= first) return Status::OK();
  return Status::NotFound("replicate: group " + std::to_string(next_) +
                          " is no longer in stream \"" + stream_ + "\" (it holds " +
                          (first <= last
                               ? "groups " + std::to_string(first) + ".." + std::to_string(last)
                               : "no groups; the next is " + std::to_string(first)) +
                          "): restore from a snapshot that covers group " +
                          std::to_string(first - 1) + " or a later one");
}

Status GroupReader::Subscribe() {
  WHARF_DASSERT(subscription_ == nullptr);
  const uint64_t reconnects = Reconnects();
  uint64_t first = 0, last = 0;
  Status s = StreamSequences(&first, &last);
  if (!s.ok()) return s;
  s = CheckNotPurged(first, last);
  if (!s.ok()) return s;
  last_known_.store(last, std::memory_order_relaxed);

  jsSubOptions options;
  jsSubOptions_Init(&options);
  options.Stream = stream_.c_str();
  options.Ordered = true;
  options.Config.DeliverPolicy = js_DeliverByStartSequence;
  options.Config.OptStartSeq = next_;
  options.Config.Heartbeat = kHeartbeatNs;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus ns = js_SubscribeSync(&subscription_, js_, subject_.c_str(), nullptr, &options, &code);
  if (ns == NATS_OK) {
    ns = natsSubscription_SetPendingLimits(subscription_, -1, static_cast<int>(pending_bytes_max_));
  }
  if (ns != NATS_OK) {
    Drop();
    return Status::IOError("replicate: reading stream \"" + stream_ + "\" from group " +
                               std::to_string(next_) + ": " + NatsText(ns, code),
                           /*retryable=*/true);
  }
  subscribed_reconnects_ = reconnects;
  fresh_ = true;
  return Status::OK();
}

Status GroupReader::Next(uint32_t timeout_ms, Group* group) {
  WHARF_ASSERT(group != nullptr);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last_error;
  while (true) {
    const auto now = Clock::now();
    if (subscription_ == nullptr) {
      last_error = Subscribe();
      if (!last_error.ok()) {
        // A purge or a missing stream does not heal by waiting; NATS being away may.
        if (!last_error.IsIOError() || now >= deadline) return last_error;
        std::this_thread::sleep_for(kRetryPause);
        continue;
      }
    }
    if (now >= deadline) {
      return Status::IOError("replicate: no group " + std::to_string(next_) + " in stream \"" +
                                 stream_ + "\" within " + std::to_string(timeout_ms) + " ms",
                             /*retryable=*/true)
          .WithSubCode(Status::SubCode::kTimedOut);
    }
    const auto slice =
        std::min<Clock::duration>(kWaitSlice, std::max<Clock::duration>(deadline - now, {}));
    natsMsg* raw = nullptr;
    const natsStatus ns = natsSubscription_NextMsg(
        &raw, subscription_,
        std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(slice).count()));
    NatsMsgPtr msg(raw);
    if (ns == NATS_TIMEOUT) {
      // nats.c's ordered consumer may not notice that a restarted server lost it: a reconnect is
      // reason enough to create it again (from next_: nothing is skipped or repeated).
      if (Reconnects() != subscribed_reconnects_) Drop();
      continue;
    }
    if (ns != NATS_OK) {
      // Missed heartbeats, a slow consumer (messages dropped), a closed subscription: start again.
      Drop();
      if (natsConnection_IsClosed(connection_)) {
        return Status::IOError("replicate: the NATS connection is closed: " + NatsText(ns));
      }
      continue;
    }
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg.get()) != NATS_OK) {
      Drop();  // not a JetStream message: nothing of ours
      continue;
    }
    const uint64_t sequence = meta->Sequence.Stream;
    last_known_.store(sequence + meta->NumPending, std::memory_order_relaxed);
    jsMsgMetaData_Destroy(meta);
    if (sequence < next_) continue;  // delivered again after a reset: already returned
    if (sequence > next_) {
      // Groups next_..sequence-1 were not delivered: purged (below the first sequence now),
      // dropped by nats.c (the reader fell behind), or absent from the stream.
      const bool fresh = fresh_;
      Drop();
      uint64_t first = 0, last = 0;
      Status s = StreamSequences(&first, &last);
      if (s.ok()) s = CheckNotPurged(first, last);
      if (!s.ok() && !s.IsIOError()) return s;
      if (fresh) {
        // A new consumer starts at next_: a message after it means next_ is not in the stream.
        return Status::Corruption("replicate: group " + std::to_string(next_) +
                                  " is missing from stream \"" + stream_ + "\" (the next is " +
                                  std::to_string(sequence) + ")");
      }
      continue;
    }
    fresh_ = false;
    Group read;
    read.number = sequence;
    uint64_t header_group = 0;
    const bool headers_ok = HeaderU64(msg.get(), "Wharf-Group", &header_group) &&
                            HeaderText(msg.get(), "Wharf-Database", &read.database_id) &&
                            HeaderU64(msg.get(), "Wharf-Last-Fact-Id", &read.last_fact_id) &&
                            HeaderU64(msg.get(), "Wharf-Format", &read.format_version);
    if (!headers_ok || header_group != sequence || !IsDatabaseId(read.database_id)) {
      return Status::Corruption(
          "replicate: message " + std::to_string(sequence) + " of stream \"" + stream_ +
          "\" is not group " + std::to_string(sequence) +
          (headers_ok ? " (its headers say group " + std::to_string(header_group) +
                            " of database \"" + read.database_id + "\")"
                      : " (it lacks a Wharf-Group, Wharf-Database, Wharf-Last-Fact-Id or "
                        "Wharf-Format header)"));
    }
    if (!HeaderText(msg.get(), "Wharf-Term", &read.term_hex)) read.term_hex.clear();  // optional
    read.bytes.assign(MsgData(msg.get()));
    ++next_;
    *group = std::move(read);
    return Status::OK();
  }
}

}  // namespace wharf::internal
