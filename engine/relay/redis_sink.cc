// RedisStreamsSink: pipelined XADD with ids derived from fact ids.
#include "engine/relay/redis_sink.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

#include "engine/base/assert.h"
#include "engine/relay/sigpipe_guard.h"

namespace wharf::internal {
namespace {

constexpr std::string_view kNotAboveTop = "equal or smaller than the target stream top item";
constexpr const char* kRedisCancelled = "redis: not published, the runtime is stopping";

// Errors after which the same XADD may succeed later: the server is loading, busy, out of
// memory, a replica, or the credentials/ACL are being fixed. Anything else is the fact's.
bool IsTransientError(std::string_view text) {
  for (std::string_view prefix :
       {"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "READONLY", "OOM", "CLUSTERDOWN", "NOREPLICAS",
        "NOAUTH", "WRONGPASS", "NOPERM", "MISCONF", "ERR max number of clients"}) {
    if (text.starts_with(prefix)) return true;
  }
  return false;
}

std::string EntryId(uint64_t fact_id) { return std::to_string(fact_id) + "-0"; }

// "<ms>-<seq>" as a pair (0-0 when malformed).
std::pair<uint64_t, uint64_t> ParseEntryId(std::string_view id) {
  unsigned long long ms = 0, seq = 0;
  if (std::sscanf(std::string(id).c_str(), "%llu-%llu", &ms, &seq) != 2) return {0, 0};
  return {ms, seq};
}

// The first entry of an XRANGE reply: its id and its incarnation field (absent: 0; nullopt when
// it is not 16 hex digits, which matches no incarnation).
struct StreamEntry {
  bool exists = false;
  std::pair<uint64_t, uint64_t> id;
  std::optional<uint64_t> incarnation = 0;
};

StreamEntry FirstEntry(const redisReply* range) {
  StreamEntry entry;
  if (range->type != REDIS_REPLY_ARRAY || range->elements < 1) return entry;
  const redisReply* item = range->element[0];
  if (item->type != REDIS_REPLY_ARRAY || item->elements < 2 ||
      item->element[0]->type != REDIS_REPLY_STRING) {
    return entry;
  }
  entry.exists = true;
  entry.id = ParseEntryId(std::string_view(item->element[0]->str, item->element[0]->len));
  const redisReply* fields = item->element[1];
  if (fields->type != REDIS_REPLY_ARRAY) return entry;
  for (size_t f = 0; f + 1 < fields->elements; f += 2) {
    const redisReply* name = fields->element[f];
    const redisReply* value = fields->element[f + 1];
    if (name->type != REDIS_REPLY_STRING ||
        std::string_view(name->str, name->len) != "incarnation") {
      continue;
    }
    entry.incarnation = std::nullopt;
    if (value->type != REDIS_REPLY_STRING || value->len != 16) continue;
    uint64_t number = 0;
    const char* end = value->str + value->len;
    auto [stop, ec] = std::from_chars(value->str, end, number, 16);
    if (ec == std::errc() && stop == end) entry.incarnation = number;
  }
  return entry;
}

std::string IncarnationText(std::optional<uint64_t> incarnation) {
  return incarnation ? IncarnationHex(*incarnation) : "malformed";
}

timeval Timeval(uint32_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Reads the next reply. nullptr: the connection broke (*error says why).
Reply NextReply(redisContext* context, std::string* error) {
  void* raw = nullptr;
  if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
    *error =
        std::string("redis connection: ") + (context->errstr[0] != '\0' ? context->errstr : "lost");
    return nullptr;
  }
  return Reply(static_cast<redisReply*>(raw));
}

}  // namespace

RedisStreamsSink::RedisStreamsSink(RelayConfig config) : config_(std::move(config)) {
  Status s = ParseHostPort(config_.url, "redis", 6379, &host_, &port_);
  WHARF_ASSERT(s.ok());  // ParseRelayConfig checked it
}

RedisStreamsSink::~RedisStreamsSink() {
  for (redisContext* context : idle_) redisFree(context);
}

Status RedisStreamsSink::Validate(const std::string& relay_name, Ordering ordering) {
  if (ordering != Ordering::kGlobal && !TemplateHasPartition(config_.target)) {
    return Status::InvalidArgument(
        "relay '" + relay_name + "': stream='" + config_.target +
        "' would let the lanes of several partitions write into one stream, where Redis accepts "
        "only increasing ids (a later fact of one partition would make an earlier one of another "
        "look already published): put {partition} in the template, or use ordering=global");
  }
  return Status::OK();
}

void RedisStreamsSink::SetIncarnations(const Incarnations& incarnations) {
  incarnations_ = incarnations;
}

RelaySink::Counters RedisStreamsSink::counters() const { return counters_.Get(); }

redisContext* RedisStreamsSink::Acquire(uint64_t cancels, std::string* error) {
  {
    MutexLock lock(&mutex_);
    if (cancels_ != cancels) {
      *error = kRedisCancelled;
      return nullptr;
    }
    if (!idle_.empty()) {
      redisContext* context = idle_.back();
      idle_.pop_back();
      busy_.push_back(context);
      return context;
    }
  }
  redisContext* context =
      redisConnectWithTimeout(host_.c_str(), port_, Timeval(config_.timeout_ms));
  if (context == nullptr || context->err != 0) {
    *error = "redis connect to " + host_ + ":" + std::to_string(port_) + ": " +
             (context != nullptr ? context->errstr : "out of memory");
    if (context != nullptr) redisFree(context);
    return nullptr;
  }
  redisSetTimeout(context, Timeval(config_.timeout_ms));
  bool cancelled = false;
  {
    MutexLock lock(&mutex_);
    cancelled = cancels_ != cancels;
    if (!cancelled) busy_.push_back(context);  // from here on, Cancel shuts it down
  }
  if (cancelled) {
    redisFree(context);
    *error = kRedisCancelled;
    return nullptr;
  }
  if (!config_.password.empty()) {
    std::vector<const char*> argv{"AUTH"};
    std::vector<size_t> lengths{4};
    if (!config_.user.empty()) {
      argv.push_back(config_.user.data());
      lengths.push_back(config_.user.size());
    }
    argv.push_back(config_.password.data());
    lengths.push_back(config_.password.size());
    Reply reply(static_cast<redisReply*>(
        redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      *error = "redis AUTH: " + (reply != nullptr ? std::string(reply->str, reply->len)
                                                  : std::string(context->errstr));
      Release(context, cancels, /*healthy=*/false);
      return nullptr;
    }
  }
  return context;
}

void RedisStreamsSink::Release(redisContext* context, uint64_t cancels, bool healthy) {
  {
    MutexLock lock(&mutex_);
    std::erase(busy_, context);
    // A connection Cancel shut down (or may have) is of no further use.
    if (healthy && cancels_ == cancels) {
      idle_.push_back(context);
      return;
    }
  }
  redisFree(context);  // a broken, timed-out or cancelled context cannot be reused
}

void RedisStreamsSink::Cancel() {
  MutexLock lock(&mutex_);
  ++cancels_;
  // Blocked reads and writes on these fail at once; their owners then free them (Release).
  for (redisContext* context : busy_) ::shutdown(context->fd, SHUT_RDWR);
}

bool RedisStreamsSink::SendChunk(redisContext* context, std::span<const Fact* const> facts,
                                 size_t begin, size_t end, const std::vector<std::string>& streams,
                                 std::vector<PublishOutcome>* outcomes,
                                 std::vector<size_t>* candidates) {
  const std::string maxlen = std::to_string(config_.maxlen);
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (size_t i = begin; i < end; ++i) {
    const Fact& fact = *facts[i];
    const std::string id = EntryId(fact.id), fact_id = std::to_string(fact.id),
                      partition = std::to_string(fact.partition),
                      commit_ms = std::to_string(fact.commit_ms), v = std::to_string(fact.v),
                      stored_v = std::to_string(fact.stored_v), depth = std::to_string(fact.depth);
    const uint64_t incarnation = incarnations_.Of(fact.id);
    const std::string incarnation_hex = incarnation != 0 ? IncarnationHex(incarnation) : "";
    std::vector<std::string> header_names;
    header_names.reserve(fact.headers.size());
    for (const auto& [name, value] : fact.headers) header_names.push_back("h:" + name);
    argv.clear();
    lengths.clear();
    auto add = [&](std::string_view text) {
      argv.push_back(text.data());
      lengths.push_back(text.size());
    };
    add("XADD");
    add(streams[i]);
    if (config_.maxlen > 0) {
      add("MAXLEN");
      add("~");
      add(maxlen);
    }
    add(id);
    add("fact_id");
    add(fact_id);
    add("type");
    add(fact.type);
    add("key");
    add(fact.key);
    add("payload");
    add(fact.payload);
    add("partition");
    add(partition);
    add("commit_ms");
    add(commit_ms);
    // The envelope: the payload's version as published (relay_payload) and as stored, who emitted
    // it, and its cascade depth.
    add("v");
    add(v);
    add("stored_v");
    add(stored_v);
    add("source");
    add(fact.source);
    add("depth");
    add(depth);
    if (incarnation != 0) {  // absent means 0: entries written before incarnations existed
      add("incarnation");
      add(incarnation_hex);
    }
    for (size_t h = 0; h < fact.headers.size(); ++h) {
      add(header_names[h]);
      add(fact.headers[h].second);
    }
    // Appends to the output buffer (copies the arguments); sent by the first redisGetReply.
    if (redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      for (size_t j = begin; j < end; ++j) (*outcomes)[j].error = "redis: out of memory";
      return false;
    }
  }
  for (size_t i = begin; i < end; ++i) {
    std::string error;
    Reply reply = NextReply(context, &error);
    if (reply == nullptr) {
      for (size_t j = i; j < end; ++j) (*outcomes)[j].error = error;
      return false;
    }
    PublishOutcome& outcome = (*outcomes)[i];
    if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) {
      outcome.result = PublishResult::kAcknowledged;
      continue;
    }
    std::string text = reply->type == REDIS_REPLY_ERROR ? std::string(reply->str, reply->len)
                                                        : "unexpected reply to XADD";
    if (text.find(kNotAboveTop) != std::string::npos) {
      candidates->push_back(i);
      outcome.error = std::move(text);
    } else {
      outcome.result =
          IsTransientError(text) ? PublishResult::kTransient : PublishResult::kRejected;
      outcome.error = "redis XADD " + streams[i] + ": " + text;
    }
  }
  return true;
}

bool RedisStreamsSink::CheckCandidates(redisContext* context, std::span<const Fact* const> facts,
                                       const std::vector<std::string>& streams,
                                       const std::vector<size_t>& candidates,
                                       std::vector<PublishOutcome>* outcomes) {
  // Per candidate: the entry at the fact's id or else the next one (what moved the stream past
  // it), and the stream's first entry (to tell a trimmed one).
  for (size_t i : candidates) {
    const std::string id = EntryId(facts[i]->id);
    redisAppendCommand(context, "XRANGE %b %b + COUNT 1", streams[i].data(), streams[i].size(),
                       id.data(), id.size());
    redisAppendCommand(context, "XRANGE %b - + COUNT 1", streams[i].data(), streams[i].size());
  }
  for (size_t i : candidates) {
    std::string error;
    Reply at = NextReply(context, &error);
    Reply first_reply = at != nullptr ? NextReply(context, &error) : nullptr;
    if (at == nullptr || first_reply == nullptr) {
      for (size_t j : candidates) {
        if ((*outcomes)[j].result == PublishResult::kTransient) (*outcomes)[j].error = error;
      }
      return false;
    }
    PublishOutcome& outcome = (*outcomes)[i];
    const uint64_t fact_id = facts[i]->id;
    const uint64_t incarnation = incarnations_.Of(fact_id);
    const StreamEntry entry = FirstEntry(at.get());
    const StreamEntry first = FirstEntry(first_reply.get());
    const std::pair<uint64_t, uint64_t> fact_entry{fact_id, 0};
    const bool present = entry.exists && entry.id == fact_entry;
    const bool trimmed = !present && config_.maxlen > 0 && first.exists && first.id > fact_entry;
    // The entry that stands for the fact (itself, or the first one past it when it was trimmed)
    // was written by this database's history: of the fact's incarnation, or of the one this
    // database gives its id. An entry of another incarnation under the same id is another fact,
    // published by the database this one was restored from (or by another restore of it).
    const StreamEntry& witness = present ? entry : first;
    const bool witness_ours = witness.incarnation == incarnation ||
                              witness.incarnation == incarnations_.Of(witness.id.first);
    if ((present || trimmed) && witness_ours) {
      outcome.result = PublishResult::kDuplicate;
      outcome.error.clear();
      continue;
    }
    outcome.result = PublishResult::kRejected;
    // Past the fact without it: the next entry tells whether another incarnation wrote there.
    const StreamEntry& other = present || trimmed ? witness : entry;
    const bool other_ours = !other.exists || other.incarnation == incarnation ||
                            other.incarnation == incarnations_.Of(other.id.first);
    if (!other_ours) {
      outcome.error = "redis stream " + streams[i] + " holds entry " +
                      std::to_string(other.id.first) + "-" + std::to_string(other.id.second) +
                      " from another incarnation of this database (" +
                      IncarnationText(other.incarnation) + "; this fact " + EntryId(fact_id) +
                      " is of " + IncarnationHex(incarnation) +
                      "): it was restored from a backup and gives out ids the original database "
                      "already published; publish into a new stream, e.g. with {incarnation} in "
                      "the stream template";
    } else {
      outcome.error = "redis stream " + streams[i] + " holds entries past " + EntryId(fact_id) +
                      " but not this fact: another writer uses the stream, or an entry was lost (" +
                      outcome.error + ")";
    }
  }
  return true;
}

void RedisStreamsSink::Publish(std::span<const Fact* const> facts,
                               std::vector<PublishOutcome>* outcomes) {
  const SigpipeGuard sigpipe_guard;  // a broker gone mid-write must not end the process
  outcomes->assign(facts.size(), PublishOutcome{PublishResult::kTransient, ""});
  if (facts.empty()) return;
  std::vector<std::string> streams;
  streams.reserve(facts.size());
  for (const Fact* fact : facts) {
    streams.push_back(ExpandTemplate(config_.target, *fact, incarnations_.Of(fact->id)));
  }
  std::string error;
  uint64_t cancels = 0;
  {
    MutexLock lock(&mutex_);
    cancels = cancels_;
  }
  redisContext* context = Acquire(cancels, &error);
  bool healthy = context != nullptr;
  if (!healthy) {
    for (PublishOutcome& outcome : *outcomes) outcome.error = error;
  }
  std::vector<size_t> candidates;
  for (size_t begin = 0; healthy && begin < facts.size(); begin += config_.in_flight) {
    const size_t end = std::min(facts.size(), begin + size_t{config_.in_flight});
    healthy = SendChunk(context, facts, begin, end, streams, outcomes, &candidates);
    if (!healthy) {
      for (size_t j = end; j < facts.size(); ++j) (*outcomes)[j].error = (*outcomes)[begin].error;
    }
  }
  if (healthy && !candidates.empty()) {
    healthy = CheckCandidates(context, facts, streams, candidates, outcomes);
  }
  for (size_t i : candidates) {
    PublishOutcome& outcome = (*outcomes)[i];
    if (outcome.result == PublishResult::kTransient && outcome.error.empty()) {
      outcome.error = "redis: connection lost while checking a refused XADD";
    }
  }
  if (context != nullptr) Release(context, cancels, healthy);
  counters_.Count(*outcomes);
}

}  // namespace wharf::internal
