#include "engine/replicate/nats_link.h"

#include <nats/nats.h>
#include <simdjson.h>

#include <cstdlib>

namespace wharf::internal {
namespace {

// The options of one JetStream request that waits `wait_ms` for its answer.
jsOptions RequestOptions(uint32_t wait_ms) {
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = wait_ms;
  return options;
}

// The TLS settings of `config` on `options`. Not NATS_OK: *what names the option that failed.
natsStatus ApplyTls(const NatsConnectOptions& config, natsOptions* options, std::string* what) {
  if (!config.tls) return NATS_OK;
  *what = "tls=1";
  natsStatus s = natsOptions_SetSecure(options, true);
  if (s == NATS_OK && !config.tls_ca.empty()) {
    *what = "tls_ca='" + config.tls_ca + "'";
    s = natsOptions_LoadCATrustedCertificates(options, config.tls_ca.c_str());
  }
  if (s == NATS_OK && !config.tls_cert.empty()) {
    *what = "tls_cert='" + config.tls_cert + "', tls_key='" + config.tls_key + "'";
    s = natsOptions_LoadCertificatesChain(options, config.tls_cert.c_str(), config.tls_key.c_str());
  }
  return s;
}

struct OptionsDeleter {
  void operator()(natsOptions* options) const { natsOptions_Destroy(options); }
};

}  // namespace

std::string NatsStatusText(int status) {
  const auto nats_status = static_cast<natsStatus>(status);
  std::string text = natsStatus_GetText(nats_status);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  if (detail != nullptr && detail[0] != '\0' && last == nats_status) {
    text += std::string(": ") + detail;
  }
  return text;
}

NatsConnectOptions NatsConnectOptionsOf(const ReplicateConfig& config) {
  NatsConnectOptions options;
  options.url = config.url;
  options.user = config.user;
  options.password = config.password;
  options.token = config.token;
  options.tls =
      config.tls || !config.tls_ca.empty() || !config.tls_cert.empty() || !config.tls_key.empty();
  options.tls_ca = config.tls_ca;
  options.tls_cert = config.tls_cert;
  options.tls_key = config.tls_key;
  options.timeout_ms = config.timeout_ms;
  return options;
}

std::vector<std::string> SplitNatsUrls(std::string_view url) {
  std::vector<std::string> urls;
  while (!url.empty()) {
    const size_t comma = url.find(',');
    std::string_view one = url.substr(0, comma);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (!one.empty()) urls.emplace_back(one);
    url.remove_prefix(comma == std::string_view::npos ? url.size() : comma + 1);
  }
  return urls;
}

Status CheckNatsTls(const NatsConnectOptions& options, std::string_view context) {
  if (!options.tls) return Status::OK();
  natsOptions* raw = nullptr;
  natsStatus s = natsOptions_Create(&raw);
  std::unique_ptr<natsOptions, OptionsDeleter> nats_options(raw);
  std::string what = "nats options";
  if (s == NATS_OK) s = ApplyTls(options, raw, &what);
  if (s == NATS_OK) return Status::OK();
  return Status::InvalidArgument(std::string(context) + ": " + what + ": " + NatsStatusText(s));
}

int NatsConnect(const NatsConnectOptions& config, natsConnection** connection, std::string* error) {
  *connection = nullptr;
  natsOptions* raw = nullptr;
  natsStatus s = natsOptions_Create(&raw);
  std::unique_ptr<natsOptions, OptionsDeleter> options(raw);
  const std::vector<std::string> urls = SplitNatsUrls(config.url);
  std::vector<const char*> servers;
  for (const std::string& url : urls) servers.push_back(url.c_str());
  if (s == NATS_OK && servers.empty()) s = NATS_INVALID_ARG;
  if (s == NATS_OK) {
    s = natsOptions_SetServers(raw, servers.data(), static_cast<int>(servers.size()));
  }
  if (s == NATS_OK) s = natsOptions_SetTimeout(raw, config.timeout_ms);
  // Once connected, reconnect forever: publishes wait in the reconnect buffer, and those not
  // acknowledged in time are retried by their owner (the duplicate window drops doubles).
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(raw, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(raw, 100);
  if (s == NATS_OK && !config.user.empty()) {
    s = natsOptions_SetUserInfo(raw, config.user.c_str(), config.password.c_str());
  }
  if (s == NATS_OK && !config.token.empty()) s = natsOptions_SetToken(raw, config.token.c_str());
  std::string tls_what;
  if (s == NATS_OK) s = ApplyTls(config, raw, &tls_what);
  if (s != NATS_OK) {
    // CheckNatsTls loaded the same files when the configuration was checked; they changed since.
    *error = "nats options" + (tls_what.empty() ? "" : " (" + tls_what + ")") + " for '" +
             config.url + "': " + NatsStatusText(s);
    return s;
  }
  s = natsConnection_Connect(connection, raw);
  if (s != NATS_OK) {
    *connection = nullptr;
    *error = "nats connect to " + config.url + (config.tls ? " over TLS" : "") + ": " +
             NatsStatusText(s);
    if (s == NATS_SSL_ERROR && !config.tls) {
      // nats.c upgrades to TLS when the server requires it, trusting only the system's CAs.
      error->append(" (the server requires TLS: give tls_ca=<the CA of its certificate>)");
    }
  }
  return s;
}

void NatsMsgDeleter::operator()(natsMsg* msg) const { natsMsg_Destroy(msg); }

std::string NatsHeader(natsMsg* msg, const char* name) {
  const char* value = nullptr;
  if (natsMsgHeader_Get(msg, name, &value) != NATS_OK || value == nullptr) return "";
  return value;
}

NatsPubAck ParsePubAck(natsMsg* reply) {
  NatsPubAck ack;
  const std::string_view data(natsMsg_GetData(reply),
                              static_cast<size_t>(natsMsg_GetDataLength(reply)));
  if (data.empty()) {
    const std::string status = NatsHeader(reply, "Status");
    ack.code = status.empty() ? -1 : std::atoi(status.c_str());
    ack.description = "status " + (status.empty() ? std::string("missing") : status);
    const std::string text = NatsHeader(reply, "Description");
    if (!text.empty()) ack.description += " (" + text + ")";
    return ack;
  }
  // {"stream": "X", "seq": N[, "duplicate": true]} or
  // {"error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 5"}}.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object error;
  int64_t seq = 0;
  auto unexpected = [&] {
    ack.code = -1;
    ack.description = "unexpected reply: " + std::string(data.substr(0, 200));
    return ack;
  };
  if (parser.parse(data.data(), data.size()).get(root) != simdjson::SUCCESS) return unexpected();
  if (root["error"].get(error) == simdjson::SUCCESS) {
    int64_t code = -1, err_code = 0;
    std::string_view description;
    if (error["code"].get(code) != simdjson::SUCCESS) code = -1;
    if (error["err_code"].get(err_code) != simdjson::SUCCESS) err_code = 0;
    if (error["description"].get(description) != simdjson::SUCCESS) description = "";
    ack.code = static_cast<int>(code);
    ack.err_code = static_cast<int>(err_code);
    ack.description = std::string(description);
    return ack;
  }
  if (root["seq"].get(seq) != simdjson::SUCCESS || seq <= 0) return unexpected();
  bool duplicate = false;
  if (root["duplicate"].get(duplicate) != simdjson::SUCCESS) duplicate = false;
  ack.stored = true;
  ack.seq = static_cast<uint64_t>(seq);
  ack.duplicate = duplicate;
  return ack;
}

Status NatsLink::Connect(const ReplicateConfig& config, std::unique_ptr<NatsLink>* link) {
  const NatsConnectOptions options = NatsConnectOptionsOf(config);
  Status checked = CheckNatsTls(options, "replicate");
  if (!checked.ok()) return checked;
  std::unique_ptr<NatsLink> made(new NatsLink(config));
  std::string error;
  const auto s = static_cast<natsStatus>(NatsConnect(options, &made->connection_, &error));
  if (s != NATS_OK) {
    // Credentials and options are the configuration's to fix; the rest may pass (a server down).
    if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED || s == NATS_INVALID_ARG) {
      return Status::InvalidArgument("replicate: " + error);
    }
    return Status::IOError("replicate: " + error, /*retryable=*/true);
  }
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = config.timeout_ms;
  natsStatus js = natsConnection_JetStream(&made->js_, made->connection_, &js_options);
  if (js != NATS_OK) {
    return Status::IOError("replicate: JetStream context at " + config.url + ": " +
                           NatsStatusText(js));
  }
  *link = std::move(made);
  return Status::OK();
}

NatsLink::~NatsLink() {
  Close();
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (connection_ != nullptr) natsConnection_Destroy(connection_);
}

void NatsLink::Close() {
  if (connection_ != nullptr) natsConnection_Close(connection_);
}

std::string NatsLink::Where(const std::string& stream) const {
  return "stream \"" + stream + "\" at " + config_.url;
}

Status NatsLink::JsError(std::string_view what, const std::string& stream, int status, int js_code,
                         int not_found_code) const {
  std::string text =
      "replicate: " + std::string(what) + " of " + Where(stream) + ": " + NatsStatusText(status);
  if (js_code != 0) text += " (JetStream error " + std::to_string(js_code) + ")";
  if (js_code == not_found_code && not_found_code != 0) return Status::NotFound(text);
  return Status::IOError(text, /*retryable=*/true);
}

Status NatsLink::StreamInfo(const std::string& stream, StreamState* state, uint32_t wait_ms) {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  jsOptions options = RequestOptions(wait_ms != 0 ? wait_ms : config_.timeout_ms);
  natsStatus s = js_GetStreamInfo(&info, js_, stream.c_str(), &options, &code);
  if (s != NATS_OK || info == nullptr) {
    if (info != nullptr) jsStreamInfo_Destroy(info);
    // nats.c reports a missing stream as NATS_NOT_FOUND without a JetStream code.
    if (s == NATS_NOT_FOUND) code = JSStreamNotFoundErr;
    return JsError("stream info", stream, s, code, JSStreamNotFoundErr);
  }
  state->first_seq = info->State.FirstSeq;
  state->last_seq = info->State.LastSeq;
  state->messages = info->State.Msgs;
  state->bytes = info->State.Bytes;
  state->max_bytes = info->Config != nullptr ? info->Config->MaxBytes : -1;
  state->created = false;
  jsStreamInfo_Destroy(info);
  return Status::OK();
}

Status NatsLink::EnsureStream(const StreamSpec& spec, StreamState* state) {
  const int64_t max_bytes = spec.max_bytes > 0 ? static_cast<int64_t>(spec.max_bytes) : -1;
  Status found = StreamInfo(spec.name, state);
  if (found.ok() && state->max_bytes != max_bytes) return SetMaxBytes(spec.name, max_bytes, state);
  if (!found.IsNotFound()) return found;
  std::vector<const char*> subjects;
  for (const std::string& subject : spec.subjects) subjects.push_back(subject.c_str());
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = spec.name.c_str();
  config.Subjects = subjects.data();
  config.SubjectsLen = static_cast<int>(subjects.size());
  config.Storage = js_FileStorage;
  config.Discard = js_DiscardOld;
  config.MaxBytes = max_bytes;
  config.Replicas = spec.replicas;
  config.Duplicates = int64_t{spec.duplicate_window_ms} * 1000 * 1000;  // nanoseconds
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(&info, js_, &config, nullptr, &code);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  if (s != NATS_OK && code == JSStreamNameExistErr) {
    return StreamInfo(spec.name, state);  // another client created it meanwhile
  }
  if (s != NATS_OK) {
    std::string what = "creating (replicas " + std::to_string(spec.replicas) + ", subjects";
    for (const std::string& subject : spec.subjects) what += " " + subject;
    return JsError(what + ")", spec.name, s, code, 0);
  }
  *state = StreamState{};
  state->max_bytes = max_bytes;
  state->created = true;
  return Status::OK();
}

Status NatsLink::SetMaxBytes(const std::string& stream, int64_t max_bytes, StreamState* state) {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  jsOptions options = RequestOptions(config_.timeout_ms);
  natsStatus s = js_GetStreamInfo(&info, js_, stream.c_str(), &options, &code);
  if (s == NATS_OK && info != nullptr && info->Config != nullptr) {
    info->Config->MaxBytes = max_bytes;  // the rest of its configuration stays as it is
    jsStreamInfo* updated = nullptr;
    s = js_UpdateStream(&updated, js_, info->Config, &options, &code);
    if (updated != nullptr) jsStreamInfo_Destroy(updated);
  }
  if (info != nullptr) jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    return JsError("setting the byte limit " + std::to_string(max_bytes), stream, s, code, 0);
  }
  return StreamInfo(stream, state);
}

Status NatsLink::GetMsg(const std::string& stream, uint64_t seq, NatsMsgPtr* msg,
                        uint32_t wait_ms) {
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  jsOptions options = RequestOptions(wait_ms != 0 ? wait_ms : config_.timeout_ms);
  natsStatus s = js_GetMsg(&raw, js_, stream.c_str(), seq, &options, &code);
  if (s != NATS_OK) {
    if (raw != nullptr) natsMsg_Destroy(raw);
    if (s == NATS_NOT_FOUND) code = JSNoMessageFoundErr;
    return JsError("message " + std::to_string(seq), stream, s, code, JSNoMessageFoundErr);
  }
  msg->reset(raw);
  return Status::OK();
}

Status NatsLink::GetLastMsg(const std::string& stream, const std::string& subject,
                            NatsMsgPtr* msg) {
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, js_, stream.c_str(), subject.c_str(), nullptr, &code);
  if (s != NATS_OK) {
    if (raw != nullptr) natsMsg_Destroy(raw);
    if (s == NATS_NOT_FOUND) code = JSNoMessageFoundErr;
    return JsError("last message on " + subject, stream, s, code, JSNoMessageFoundErr);
  }
  msg->reset(raw);
  return Status::OK();
}

}  // namespace wharf::internal
