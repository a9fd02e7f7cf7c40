// GroupStream: the committer's groups, published in order to a JetStream stream (see the header).
#include "engine/replicate/group_stream.h"

#include <nats/nats.h>

#include <cstdio>
#include <random>

#include "engine/base/assert.h"

namespace wharf::internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kBackoffFirst{50};
constexpr milliseconds kBackoffMax{1000};

// 16 hex digits, new at every Open: what tells two writers of one database apart.
std::string RandomWriter() {
  std::random_device random;
  const uint64_t value = (uint64_t{random()} << 32) ^ random();
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// JetStream's rule for stream names (they become subject tokens and file names).
bool IsJetStreamName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' || c <= ' ' || c == 0x7f) {
      return false;
    }
  }
  return true;
}

// The database id goes into headers and message ids: letters, digits and '-' only.
bool ValidDatabaseId(const std::string& id) {
  if (id.empty()) return false;
  for (char c : id) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A refusal that a resync may explain (JetStream's wrong last sequence / message id) or that
// passes (no responders, JetStream unavailable, timeouts: any 5xx), as opposed to one for good.
bool Transient(const NatsPubAck& ack) {
  return ack.err_code == JSStreamWrongLastSequenceErr ||
         ack.err_code == JSStreamWrongLastMsgIDErr || ack.code >= 500 || ack.code <= 0;
}

// Another primary extended the stream.
Status Fenced(const std::string& message) {
  return Status::Conflict(message).WithSubCode(Status::SubCode::kPrimaryFenced);
}

}  // namespace

GroupStream::GroupStream(std::unique_ptr<NatsLink> link, std::string database_id,
                         uint32_t format_version, std::string term_hex, uint64_t last_group,
                         uint64_t stream_bytes, GroupSinkListener* listener)
    : link_(std::move(link)),
      stream_(link_->config().stream),
      subject_(stream_ + ".groups"),
      database_id_(std::move(database_id)),
      format_version_(format_version),
      term_hex_(std::move(term_hex)),
      writer_(RandomWriter()),
      listener_(listener),
      counted_bytes_(stream_bytes),
      last_shipped_(last_group),
      reported_(last_group),
      next_to_send_(last_group + 1) {}

Status GroupStream::Open(const ReplicateConfig& config, std::string database_id,
                         uint32_t format_version, uint64_t local_last_group,
                         GroupSinkListener* listener, std::unique_ptr<GroupStream>* stream,
                         std::string term_hex) {
  WHARF_ASSERT(listener != nullptr);
  if (!IsJetStreamName(config.stream)) {
    return Status::InvalidArgument("replicate: stream name \"" + config.stream +
                                   "\" is not a JetStream stream name (no '.', '*', '>', '/', "
                                   "'\\' or blanks)");
  }
  if (config.timeout_ms == 0) {
    return Status::InvalidArgument("replicate: timeout_ms must be above 0");
  }
  if (!ValidDatabaseId(database_id)) {
    return Status::InvalidArgument("replicate: database id \"" + database_id +
                                   "\" is not letters, digits and '-'");
  }
  if (!term_hex.empty() && !ValidDatabaseId(term_hex)) {
    return Status::InvalidArgument("replicate: term \"" + term_hex +
                                   "\" is not letters, digits and '-'");
  }
  std::unique_ptr<NatsLink> link;
  Status s = NatsLink::Connect(config, &link);
  if (!s.ok()) return s;
  const std::string subject = config.stream + ".groups";
  NatsLink::StreamState state;
  s = link->EnsureStream(
      {config.stream, {subject}, config.replicas, 2 * 60 * 1000, config.stream_bytes_max}, &state);
  if (!s.ok()) return s;
  const std::string where = link->Where(config.stream);
  const uint64_t last = state.last_seq;
  if (last > 0) {
    NatsMsgPtr message;
    s = link->GetLastMsg(config.stream, subject, &message);
    if (s.ok()) {
      const std::string theirs = NatsHeader(message.get(), "Wharf-Database");
      if (theirs != database_id) {
        return Status::InvalidArgument(
            "replicate: " + where + " holds another database's groups (database " +
            (theirs.empty() ? "none: its last message is not a Wharf group" : theirs) +
            ", this one " + database_id + ")");
      }
    } else if (!s.IsNotFound()) {  // NotFound: every group was purged; nothing to compare
      return s;
    }
  }
  if (last > local_last_group) {
    return Fenced("replicate: " + where + " holds groups " + std::to_string(local_last_group + 1) +
                  ".." + std::to_string(last) +
                  " this database does not have: another primary extended it; "
                  "restore or follow it (standby) instead");
  }
  if (last < local_last_group) {
    return Status::IOError(
        "replicate: " + where + (state.created ? " did not exist (created now, empty)" : "") +
        " ends at group " + std::to_string(last) + " but this database has groups up to " +
        std::to_string(local_last_group) + ": groups " + std::to_string(last + 1) + ".." +
        std::to_string(local_last_group) +
        " are missing from the stream (it was deleted, recreated or purged, or this database "
        "crashed before they were stored); restore this database from the stream, or replicate "
        "it to a new stream");
  }
  std::unique_ptr<GroupStream> made(new GroupStream(std::move(link), std::move(database_id),
                                                    format_version, std::move(term_hex),
                                                    local_last_group, state.bytes, listener));
  s = made->Start();
  if (!s.ok()) return s;
  *stream = std::move(made);
  return Status::OK();
}

Status GroupStream::Start() {
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s == NATS_OK) inbox_ = inbox;
  natsInbox_Destroy(inbox);
  const std::string wildcard = inbox_ + ".>";
  if (s == NATS_OK) {
    s = natsConnection_SubscribeSync(&reply_subscription_, link_->connection(), wildcard.c_str());
  }
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(reply_subscription_, -1, -1);
  if (s != NATS_OK) {
    return Status::IOError("replicate: subscribing to the acknowledgements (" + wildcard + ") at " +
                           link_->config().url + ": " + NatsStatusText(s));
  }
  const int64_t max_payload = natsConnection_GetMaxPayload(link_->connection());
  max_group_bytes_ =
      max_payload > static_cast<int64_t>(kHeaderRoom) ? max_payload - kHeaderRoom : 0;
  publisher_thread_ = std::thread([this] { RunPublisher(); });
  ack_thread_ = std::thread([this] { RunAcks(); });
  return Status::OK();
}

GroupStream::~GroupStream() { Close(); }

void GroupStream::Close() {
  std::call_once(closed_, [this] {
    WHARF_ASSERT(std::this_thread::get_id() != publisher_thread_.get_id());  // not from a listener
    {
      MutexLock lock(&mutex_);
      closing_ = true;
    }
    wake_.SignalAll();
    // Ends the acknowledgement thread's wait and any request of the publisher's at once.
    link_->Close();
    if (publisher_thread_.joinable()) publisher_thread_.join();
    if (ack_thread_.joinable()) ack_thread_.join();
    if (reply_subscription_ != nullptr) natsSubscription_Destroy(reply_subscription_);
    reply_subscription_ = nullptr;
    link_.reset();  // the threads that used it are gone
  });
}

std::string GroupStream::MsgId(uint64_t number) const {
  return database_id_ + ":" + std::to_string(number) + ":" + writer_;
}

GroupStream::Counters GroupStream::counters() const {
  Counters counters;
  counters.published = published_.load();
  counters.retries = retries_.load();
  counters.resyncs = resyncs_.load();
  counters.found_stored = found_stored_.load();
  counters.acked = acked_.load();
  counters.last_acked_group = last_acked_group_.load();
  counters.pending_groups = pending_groups_.load();
  counters.pending_bytes = pending_bytes_.load();
  counters.ack_latency_us = ack_latency_us_.load();
  return counters;
}

void GroupStream::Ship(uint64_t number, std::string_view bytes, uint64_t last_fact_id) {
  Group group;
  group.number = number;
  group.bytes.assign(bytes);  // copied outside the lock: the committer's write lock is held
  group.last_fact_id = last_fact_id;
  group.shipped_at = Clock::now();
  const uint64_t counted = CountedBytes(group.bytes.size());
  {
    MutexLock lock(&mutex_);
    WHARF_ASSERT(number == last_shipped_ + 1);  // the committer ships every group, in order
    last_shipped_ = number;
    counted_bytes_ += counted;
    group.counted_through = counted_bytes_;
    if (closing_ || refused_) return;  // refused: nothing after the refused group is stored
    pending_bytes_ += group.bytes.size();
    pending_groups_ += 1;
    incoming_.push_back(std::move(group));
  }
  wake_.Signal();
}

uint64_t GroupStream::CountedBytes(size_t bytes) const {
  // The store's per-message overhead is 30 bytes and the subject's; kHeaderRoom bounds the
  // headers. Rounded up to 64 bytes, so the count never falls short of the server's.
  const uint64_t total = bytes + subject_.size() + kHeaderRoom + 64;
  return (total + 63) / 64 * 64;
}

uint64_t GroupStream::counted_bytes() const {
  MutexLock lock(&mutex_);
  return counted_bytes_;
}

void GroupStream::SetRetainedBase(uint64_t counted) {
  {
    MutexLock lock(&mutex_);
    if (counted <= retained_base_) return;
    retained_base_ = counted;
    retained_moved_ = true;
  }
  wake_.Signal();
}

void GroupStream::RunAcks() {
  const size_t prefix = inbox_.size() + 1;
  while (true) {
    natsMsg* raw = nullptr;
    const natsStatus s = natsSubscription_NextMsg(&raw, reply_subscription_, 1000);
    NatsMsgPtr message(raw);
    {
      MutexLock lock(&mutex_);
      if (closing_) return;
    }
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) {
      // Only Close ends the subscription (it closes the connection); anything else passes.
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    // <inbox>.<epoch>.<group>
    const std::string subject = natsMsg_GetSubject(message.get());
    if (subject.size() <= prefix) continue;
    char* end = nullptr;
    Reply reply;
    reply.epoch = std::strtoull(subject.c_str() + prefix, &end, 10);
    if (end == nullptr || *end != '.') continue;
    reply.number = std::strtoull(end + 1, nullptr, 10);
    reply.ack = ParsePubAck(message.get());
    {
      MutexLock lock(&mutex_);
      replies_in_.push_back(std::move(reply));
    }
    wake_.Signal();
  }
}

Clock::time_point GroupStream::NextDeadline() const {
  if (resync_needed_) return retry_at_;
  if (!window_.empty() && window_.front().in_flight) {
    return window_.front().sent_at + milliseconds(link_->config().attempt_ms());
  }
  return Clock::now() + std::chrono::hours(1);
}

void GroupStream::RunPublisher() {
  std::vector<Reply> replies;
  while (true) {
    {
      MutexLock lock(&mutex_);
      wake_.WaitUntil(&mutex_, NextDeadline(), [&]() WHARF_REQUIRES(mutex_) {
        return closing_ || !replies_in_.empty() || (!incoming_.empty() && !refused_) ||
               retained_moved_ || (resync_needed_ && Clock::now() >= retry_at_);
      });
      if (closing_) return;
      if (refused_) {  // nothing more is published; wait for Close
        incoming_.clear();
        replies_in_.clear();
        continue;
      }
      while (!incoming_.empty()) {
        window_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      replies.clear();
      replies.swap(replies_in_);
      retained_base_seen_ = retained_base_;
      retained_moved_ = false;
    }

    HandleReplies(replies);
    ReportStored();
    const Clock::time_point now = Clock::now();
    if (!resync_needed_ && !window_.empty() && window_.front().in_flight &&
        now >= window_.front().sent_at + milliseconds(link_->config().attempt_ms())) {
      // No reply within an attempt: the server went away, or the stream's leader did (a publish
      // sent to a dead leader is never answered). The resync finds out what was stored.
      resync_needed_ = true;
      retry_at_ = now;
    }
    if (resync_needed_ && now >= retry_at_) {
      if (Resync()) {
        backoff_ = milliseconds(0);
      } else {
        backoff_ =
            std::min(kBackoffMax, backoff_ == milliseconds(0) ? kBackoffFirst : 2 * backoff_);
        retry_at_ = Clock::now() + backoff_;
      }
      ReportStored();
    }
    if (!resync_needed_ && !window_.empty()) PublishWindow();
  }
}

void GroupStream::HandleReplies(const std::vector<Reply>& replies) {
  for (const Reply& reply : replies) {
    if (reply.epoch != epoch_ || reply.number <= reported_ ||
        reply.number - reported_ > window_.size()) {
      continue;  // a late reply of an earlier epoch: the resync since then decided
    }
    Group& group = window_[reply.number - reported_ - 1];
    WHARF_DASSERT(group.number == reply.number);
    if (!group.in_flight) continue;
    group.in_flight = false;
    in_flight_groups_ -= 1;
    in_flight_bytes_ -= group.bytes.size();
    if (reply.ack.stored && reply.ack.seq == group.number) {
      group.stored = true;
      probing_ = false;
      continue;
    }
    if (reply.ack.stored || Transient(reply.ack)) {
      // Stored elsewhere than its number (cannot be with the expected last sequence), or refused
      // for now: the resync looks at the stream and tells which.
      if (!resync_needed_) retry_at_ = Clock::now();
      resync_needed_ = true;
      continue;
    }
    Refuse(group.number, Status::IOError("replicate: " + link_->Where(stream_) + " refused group " +
                                         std::to_string(group.number) + " (" +
                                         std::to_string(group.bytes.size()) +
                                         " bytes): " + reply.ack.description + " (code " +
                                         std::to_string(reply.ack.code) + ", err_code " +
                                         std::to_string(reply.ack.err_code) + ")"));
    return;
  }
}

void GroupStream::PublishWindow() {
  const uint64_t stream_bytes_max = link_->config().stream_bytes_max;
  bool held = false;
  while (!resync_needed_ && next_to_send_ <= reported_ + window_.size() &&
         in_flight_groups_ < (probing_ ? 1 : kWindowGroups) &&
         (in_flight_groups_ == 0 || in_flight_bytes_ < kWindowBytes)) {
    Group& group = window_[next_to_send_ - reported_ - 1];
    WHARF_DASSERT(group.number == next_to_send_);
    if (!group.stored && stream_bytes_max > 0 &&
        group.counted_through - std::min(group.counted_through, retained_base_seen_) >
            stream_bytes_max / 4 * 3) {
      held = true;  // the stream could drop a group no snapshot covers: wait for one
      break;
    }
    ++next_to_send_;
    if (group.stored) continue;
    Publish(&group);
    if (window_.empty()) return;  // refused
  }
  held_ = held;
}

void GroupStream::Publish(Group* group) {
  const std::string reply =
      inbox_ + "." + std::to_string(epoch_) + "." + std::to_string(group->number);
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject_.c_str(), reply.c_str(), group->bytes.data(),
                                static_cast<int>(group->bytes.size()));
  NatsMsgPtr message(raw);
  auto set = [&](const char* name, const std::string& value) {
    if (s == NATS_OK) s = natsMsgHeader_Set(message.get(), name, value.c_str());
  };
  set("Nats-Msg-Id", MsgId(group->number));
  set("Wharf-Database", database_id_);
  set("Wharf-Group", std::to_string(group->number));
  set("Wharf-Last-Fact-Id", std::to_string(group->last_fact_id));
  set("Wharf-Format", std::to_string(format_version_));
  if (!term_hex_.empty()) set("Wharf-Term", term_hex_);
  // Set by hand rather than through jsPubOptions: nats.c leaves out an expected sequence of 0,
  // which group 1 needs (stored only into an empty stream).
  set("Nats-Expected-Last-Sequence", std::to_string(group->number - 1));
  if (!after_resync_) set("Nats-Expected-Last-Msg-Id", MsgId(group->number - 1));
  if (s == NATS_OK) s = natsConnection_PublishMsg(link_->connection(), message.get());
  if (s == NATS_MAX_PAYLOAD) {
    Refuse(group->number,
           Status::IOError("replicate: group " + std::to_string(group->number) + " is " +
                           std::to_string(group->bytes.size()) +
                           " bytes, more than the NATS servers at " + link_->config().url +
                           " take in one message (max_payload " +
                           std::to_string(natsConnection_GetMaxPayload(link_->connection())) +
                           " bytes, headers included)"));
    return;
  }
  if (s != NATS_OK) {
    // Disconnected beyond the reconnect buffer, or closing: retried after a resync.
    resync_needed_ = true;
    retry_at_ = Clock::now() + kBackoffFirst;
    --next_to_send_;
    return;
  }
  after_resync_ = false;
  group->in_flight = true;
  group->sent_at = Clock::now();
  group->attempts += 1;
  in_flight_groups_ += 1;
  in_flight_bytes_ += group->bytes.size();
  published_ += 1;
  if (group->attempts > 1) retries_ += 1;
}

bool GroupStream::Resync() {
  resyncs_ += 1;
  epoch_ += 1;  // replies to the publishes so far are ignored from here on
  for (Group& group : window_) group.in_flight = false;
  in_flight_groups_ = 0;
  in_flight_bytes_ = 0;
  NatsLink::StreamState state;
  const uint32_t wait_ms = link_->config().attempt_ms();
  Status s = link_->StreamInfo(stream_, &state, wait_ms);
  if (s.IsNotFound()) {
    Refuse(reported_ + 1, Status::IOError("replicate: " + link_->Where(stream_) +
                                          " no longer exists (deleted after group " +
                                          std::to_string(reported_) + " was stored)"));
    return true;
  }
  if (!s.ok()) return false;  // JetStream does not answer (no quorum, election): later
  uint64_t highest_stored = reported_;
  for (const Group& group : window_) {
    if (group.stored) highest_stored = group.number;
  }
  const uint64_t last = state.last_seq;
  if (last < highest_stored) {
    Refuse(reported_ + 1,
           Status::IOError("replicate: " + link_->Where(stream_) + " lost groups: it ends at " +
                           std::to_string(last) + " but stored group " +
                           std::to_string(highest_stored) + " (was it deleted and recreated?)"));
    return true;
  }
  for (Group& group : window_) {
    if (group.number > last) break;
    if (group.stored) continue;
    NatsMsgPtr message;
    s = link_->GetMsg(stream_, group.number, &message, wait_ms);
    if (s.IsNotFound()) {
      Refuse(group.number, Status::IOError("replicate: " + link_->Where(stream_) + " ends at " +
                                           std::to_string(last) + " but has no message at group " +
                                           std::to_string(group.number) + " (purged or deleted)"));
      return true;
    }
    if (!s.ok()) return false;
    const std::string theirs = NatsHeader(message.get(), "Nats-Msg-Id");
    if (theirs != MsgId(group.number)) {
      Refuse(group.number, Fenced("replicate: another primary extended " + link_->Where(stream_) +
                                  " at group " + std::to_string(group.number) +
                                  " (message id there " + theirs + ", ours " + MsgId(group.number) +
                                  "): this database is fenced; restore or follow the stream "
                                  "(standby) instead"));
      return true;
    }
    group.stored = true;  // stored by an attempt whose reply was lost (or came too late)
    found_stored_ += 1;
  }
  next_to_send_ = reported_ + 1;
  while (next_to_send_ <= reported_ + window_.size() &&
         window_[next_to_send_ - reported_ - 1].stored) {
    ++next_to_send_;
  }
  after_resync_ = true;
  probing_ = true;
  resync_needed_ = false;
  return true;
}

void GroupStream::ReportStored() {
  const uint64_t before = reported_;
  const Clock::time_point now = Clock::now();
  while (!window_.empty() && window_.front().stored) {
    const Group& group = window_.front();
    const auto latency_us =
        std::chrono::duration_cast<std::chrono::microseconds>(now - group.shipped_at).count();
    const uint64_t average = ack_latency_us_.load();
    ack_latency_us_ =
        average == 0
            ? latency_us
            : average + (static_cast<int64_t>(latency_us) - static_cast<int64_t>(average)) / 8;
    pending_bytes_ -= group.bytes.size();
    pending_groups_ -= 1;
    acked_ += 1;
    reported_ = group.number;
    window_.pop_front();
  }
  if (reported_ == before) return;
  last_acked_group_ = reported_;
  listener_->OnGroupsShipped(reported_);
}

void GroupStream::Refuse(uint64_t number, Status why) {
  {
    MutexLock lock(&mutex_);
    refused_ = true;
    incoming_.clear();
  }
  window_.clear();
  in_flight_groups_ = 0;
  in_flight_bytes_ = 0;
  resync_needed_ = false;
  pending_bytes_ = 0;
  pending_groups_ = 0;
  listener_->OnShipRefused(number, why);
  why.PermitUncheckedError();  // the listener's to look at
}

}  // namespace wharf::internal
