// NatsJetStreamSink: JetStream publishes with Nats-Msg-Id, acknowledgements awaited in order.
#include "engine/relay/nats_sink.h"

#include <nats/nats.h>

#include <memory>
#include <string_view>

#include "engine/base/bytes_text.h"
#include "engine/relay/header_text.h"
#include "engine/relay/sigpipe_guard.h"

namespace wharf::internal {
namespace {

constexpr const char* kNatsCancelled = "nats: not published, the runtime is stopping";

struct MsgDeleter {
  void operator()(natsMsg* msg) const { natsMsg_Destroy(msg); }
};
using Msg = std::unique_ptr<natsMsg, MsgDeleter>;

// The subjects a created stream takes: the template's literal leading tokens, then ">".
std::string StreamSubjects(std::string_view target) {
  std::string prefix;
  while (!target.empty()) {
    size_t dot = target.find('.');
    std::string_view token = target.substr(0, dot);
    if (token.find('{') != std::string_view::npos || dot == std::string_view::npos) break;
    prefix.append(token).push_back('.');
    target.remove_prefix(dot + 1);
  }
  return prefix + ">";
}

// Why `fact` cannot become a message whose headers say what it is (header_text.h), or "". Such a
// fact is refused for good, a dead letter, rather than published cut or with a header it forged.
std::string CannotCarry(const Fact& fact) {
  constexpr std::string_view kWhy = " (it holds a CR, LF or NUL byte)";
  if (!HeaderValueCarries(fact.type)) {
    return "a NATS header cannot carry the fact's type" + std::string(kWhy);
  }
  if (!HeaderValueCarries(fact.source)) {
    return "a NATS header cannot carry the fact's source" + std::string(kWhy);
  }
  for (const auto& [name, value] : fact.headers) {
    if (!HeaderNameCarries(name)) {
      return "a NATS header cannot carry the fact's header name " + DescribeBytes(name) +
             " (it holds a control byte, a space or ':')";
    }
    if (!HeaderValueCarries(value)) {
      return "a NATS header cannot carry the value of the fact's header " + DescribeBytes(name) +
             std::string(kWhy);
    }
  }
  return "";
}

}  // namespace

NatsConnectOptions NatsConnectOptionsOf(const RelayConfig& config) {
  NatsConnectOptions options;
  options.url = config.url;
  options.user = config.user;
  options.password = config.password;
  options.token = config.token;
  options.tls = config.tls;
  options.tls_ca = config.tls_ca;
  options.tls_cert = config.tls_cert;
  options.tls_key = config.tls_key;
  options.timeout_ms = config.timeout_ms;
  return options;
}

Status CheckNatsTls(const RelayConfig& config) {
  return CheckNatsTls(NatsConnectOptionsOf(config), "relay options");
}

NatsJetStreamSink::NatsJetStreamSink(RelayConfig config) : config_(std::move(config)) {}

NatsJetStreamSink::~NatsJetStreamSink() {
  if (connection_ != nullptr) natsConnection_Destroy(connection_);
}

Status NatsJetStreamSink::Validate(const std::string& relay_name, Ordering ordering) {
  if (ordering != Ordering::kGlobal && !TemplateHasPartition(config_.target)) {
    return Status::InvalidArgument(
        "relay '" + relay_name + "': subject='" + config_.target +
        "' would let the lanes of several partitions publish to one subject, whose order would "
        "then interleave them: put {partition} in the template, or use ordering=global");
  }
  id_prefix_ = config_.id_prefix.empty() ? relay_name : config_.id_prefix;
  return Status::OK();
}

void NatsJetStreamSink::SetIncarnations(const Incarnations& incarnations) {
  incarnations_ = incarnations;
}

RelaySink::Counters NatsJetStreamSink::counters() const { return counters_.Get(); }

uint64_t NatsJetStreamSink::cancels() const {
  MutexLock lock(&waiting_mutex_);
  return cancels_;
}

void NatsJetStreamSink::Cancel() {
  MutexLock lock(&waiting_mutex_);
  ++cancels_;
  // Their NextMsg returns at once; their owners unsubscribe (again) and destroy them.
  for (natsSubscription* subscription : waiting_) natsSubscription_Unsubscribe(subscription);
}

natsConnection* NatsJetStreamSink::Connection(uint64_t cancels, std::string* error) {
  // A call waiting here while another connects gives up once cancelled, rather than connecting
  // again after it (a broker that never answers would hold each for timeout_ms).
  MutexLock lock(&mutex_);
  if (connection_ != nullptr) return connection_;
  if (this->cancels() != cancels) {
    *error = kNatsCancelled;
    return nullptr;
  }
  natsConnection* connection = nullptr;
  natsStatus s =
      static_cast<natsStatus>(NatsConnect(NatsConnectOptionsOf(config_), &connection, error));
  if (s != NATS_OK) return nullptr;
  if (!config_.create_stream.empty()) {
    jsCtx* js = nullptr;
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const std::string subjects = StreamSubjects(config_.target);
    const char* subject_list[] = {subjects.c_str()};
    jsStreamConfig stream;
    jsStreamConfig_Init(&stream);
    stream.Name = config_.create_stream.c_str();
    stream.Subjects = subject_list;
    stream.SubjectsLen = 1;
    stream.Storage = js_FileStorage;
    s = natsConnection_JetStream(&js, connection, nullptr);
    if (s == NATS_OK) s = js_AddStream(&info, js, &stream, nullptr, &code);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    if (js != nullptr) jsCtx_Destroy(js);
    if (s != NATS_OK && code != JSStreamNameExistErr) {
      *error = "nats: creating stream " + config_.create_stream + " over " + subjects + ": " +
               NatsStatusText(s);
      natsConnection_Destroy(connection);
      return nullptr;
    }
  }
  connection_ = connection;
  return connection_;
}

bool NatsJetStreamSink::PublishChunk(natsConnection* connection, uint64_t cancels,
                                     std::span<const Fact* const> facts, size_t begin, size_t end,
                                     std::vector<PublishOutcome>* outcomes) {
  // One inbox per chunk: a late acknowledgement of an earlier call never lands here.
  natsInbox* inbox = nullptr;
  natsSubscription* subscription = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  std::string replies = std::string(inbox != nullptr ? inbox : "") + ".";
  std::string wildcard = replies + "*";
  if (s == NATS_OK) s = natsConnection_SubscribeSync(&subscription, connection, wildcard.c_str());
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(subscription, -1, -1);
  bool healthy = s == NATS_OK;
  std::string error = healthy ? "" : "nats subscribe: " + NatsStatusText(s);
  if (healthy) {
    MutexLock lock(&waiting_mutex_);
    if (cancels_ == cancels) {
      waiting_.push_back(subscription);  // from here on, Cancel closes it
    } else {
      healthy = false;
      error = kNatsCancelled;
    }
  }
  size_t sent = begin;
  for (; healthy && sent < end; ++sent) {
    const Fact& fact = *facts[sent];
    PublishOutcome& outcome = (*outcomes)[sent];
    const uint64_t incarnation = incarnations_.Of(fact.id);
    const std::string subject = ExpandTemplate(config_.target, fact, incarnation);
    const std::string reply = replies + std::to_string(sent - begin);
    if (std::string refusal = CannotCarry(fact); !refusal.empty()) {
      outcome.result = PublishResult::kRejected;
      outcome.error = std::move(refusal);
      continue;
    }
    natsMsg* raw = nullptr;
    s = natsMsg_Create(&raw, subject.c_str(), reply.c_str(), fact.payload.data(),
                       static_cast<int>(fact.payload.size()));
    Msg msg(raw);
    // Incarnation 0 keeps the id it always had: a stream's window still drops its redeliveries.
    const std::string incarnation_hex = incarnation != 0 ? IncarnationHex(incarnation) : "";
    const std::string msg_id = id_prefix_ + ":" + (incarnation != 0 ? incarnation_hex + ":" : "") +
                               std::to_string(fact.id);
    if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), "Nats-Msg-Id", msg_id.c_str());
    if (s == NATS_OK && incarnation != 0) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Incarnation", incarnation_hex.c_str());
    }
    if (s == NATS_OK)
      s = natsMsgHeader_Set(msg.get(), "Wharf-Fact-Id", std::to_string(fact.id).c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), "Wharf-Type", fact.type.c_str());
    // Keys are bytes: one that would not arrive as it is goes base64-encoded (empty: no header,
    // as NATS drops empty ones).
    if (s == NATS_OK && !fact.key.empty()) {
      s = KeyReadsAsText(fact.key)
              ? natsMsgHeader_Set(msg.get(), "Wharf-Key", fact.key.c_str())
              : natsMsgHeader_Set(msg.get(), "Wharf-Key-B64", Base64(fact.key).c_str());
    }
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Partition", std::to_string(fact.partition).c_str());
    }
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Commit-Ms", std::to_string(fact.commit_ms).c_str());
    }
    // The envelope: the payload's version as published (relay_payload) and as stored, who emitted
    // it, and its cascade depth.
    if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), "Wharf-V", std::to_string(fact.v).c_str());
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Stored-V", std::to_string(fact.stored_v).c_str());
    }
    // Absent for an application's commit, whose source is empty (NATS drops empty headers).
    if (s == NATS_OK && !fact.source.empty()) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Source", fact.source.c_str());
    }
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg.get(), "Wharf-Depth", std::to_string(fact.depth).c_str());
    }
    for (const auto& [name, value] : fact.headers) {
      if (s == NATS_OK) s = natsMsgHeader_Add(msg.get(), name.c_str(), value.c_str());
    }
    if (s != NATS_OK) {
      // The message cannot be built from this fact (a subject or header NATS refuses).
      outcome.result = PublishResult::kRejected;
      outcome.error = "nats message for " + subject + ": " + NatsStatusText(s);
      continue;
    }
    s = natsConnection_PublishMsg(connection, msg.get());
    if (s == NATS_MAX_PAYLOAD) {
      outcome.result = PublishResult::kRejected;
      outcome.error = "nats publish to " + subject + ": " + NatsStatusText(s);
    } else if (s != NATS_OK) {
      error = "nats publish: " + NatsStatusText(s);
      healthy = false;
    } else {
      outcome.error = "no acknowledgement from JetStream";  // until one arrives
    }
  }
  // Best effort (acks are what count), and bounded: a broker that stopped answering would
  // otherwise hold the call for nats.c's default of 10 s.
  if (healthy && natsConnection_Status(connection) == NATS_CONN_STATUS_CONNECTED) {
    natsConnection_FlushTimeout(connection, config_.timeout_ms);
  }
  // Acknowledgements, in whatever order they come, each to its fact; wait for those published.
  size_t waiting = 0;
  for (size_t i = begin; i < sent; ++i) {
    waiting += (*outcomes)[i].result == PublishResult::kTransient ? 1 : 0;
  }
  while (waiting > 0 && subscription != nullptr) {
    natsMsg* raw = nullptr;
    s = natsSubscription_NextMsg(&raw, subscription, config_.timeout_ms);
    if (s != NATS_OK) {
      error = this->cancels() != cancels
                  ? kNatsCancelled
                  : "nats: waiting for JetStream acknowledgements: " + NatsStatusText(s);
      healthy = false;
      break;
    }
    Msg ack(raw);
    const std::string_view subject = natsMsg_GetSubject(ack.get());
    const size_t index =
        begin + std::strtoul(std::string(subject.substr(replies.size())).c_str(), nullptr, 10);
    if (index >= sent || (*outcomes)[index].result != PublishResult::kTransient) continue;
    --waiting;
    PublishOutcome& outcome = (*outcomes)[index];
    const NatsPubAck parsed = ParsePubAck(ack.get());
    if (parsed.stored) {
      outcome.result = parsed.duplicate ? PublishResult::kDuplicate : PublishResult::kAcknowledged;
      outcome.error.clear();
      continue;
    }
    if (natsMsg_GetDataLength(ack.get()) == 0) {
      // A status reply; 503: no responders: no stream takes the subject (yet) — the operator's
      // to fix. Retried.
      outcome.error =
          "nats: no JetStream stream takes subject " +
          ExpandTemplate(config_.target, *facts[index], incarnations_.Of(facts[index]->id)) + " (" +
          parsed.description + ")";
      continue;
    }
    outcome.error = "nats JetStream: " + parsed.description + " (code " +
                    std::to_string(parsed.code) + ", err_code " + std::to_string(parsed.err_code) +
                    ")";
    // 5xx: JetStream unavailable, timed out; anything unexpected: retry. Others (400: too large,
    // ...): the fact's.
    outcome.result = parsed.code >= 500 || parsed.code < 0 ? PublishResult::kTransient
                                                           : PublishResult::kRejected;
  }
  if (!healthy) {
    for (size_t i = begin; i < end; ++i) {
      if ((*outcomes)[i].result == PublishResult::kTransient) (*outcomes)[i].error = error;
    }
  }
  if (subscription != nullptr) {
    {
      MutexLock lock(&waiting_mutex_);
      std::erase(waiting_, subscription);
    }
    natsSubscription_Unsubscribe(subscription);
    natsSubscription_Destroy(subscription);
  }
  natsInbox_Destroy(inbox);
  return healthy;
}

void NatsJetStreamSink::Publish(std::span<const Fact* const> facts,
                                std::vector<PublishOutcome>* outcomes) {
  const SigpipeGuard sigpipe_guard;  // a broker gone mid-write must not end the process
  outcomes->assign(facts.size(), PublishOutcome{PublishResult::kTransient, ""});
  std::string error;
  const uint64_t cancels = this->cancels();
  natsConnection* connection = facts.empty() ? nullptr : Connection(cancels, &error);
  if (connection == nullptr) {
    for (PublishOutcome& outcome : *outcomes) outcome.error = error;
  }
  for (size_t begin = 0; connection != nullptr && begin < facts.size();
       begin += config_.in_flight) {
    const size_t end = std::min(facts.size(), begin + size_t{config_.in_flight});
    if (!PublishChunk(connection, cancels, facts, begin, end, outcomes)) {
      for (size_t j = end; j < facts.size(); ++j) (*outcomes)[j].error = (*outcomes)[begin].error;
      break;
    }
  }
  counters_.Count(*outcomes);
}

}  // namespace wharf::internal
