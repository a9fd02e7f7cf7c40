// NatsClient: the relay tests' JetStream client (nats.c), to create streams and read back what a
// relay stored, over plain TCP or TLS.
#pragma once

#include <nats/nats.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace wharf::testing {

// One stored JetStream message as the test reads it back.
struct Stored {
  std::string subject;
  std::string data;
  std::map<std::string, std::vector<std::string>> headers;
};

// Standard base64 (RFC 4648) back to bytes, as a consumer of Wharf-Key-B64 decodes it; stops at
// the first '=' or byte outside the alphabet.
inline std::string Base64Decode(const std::string& text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const size_t value = kAlphabet.find(c);
    if (value == std::string::npos) break;
    bits = bits << 6 | static_cast<uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

class NatsClient {
 public:
  // Over TLS when `ca_file` (PEM) is given: the server's certificate must chain to it.
  explicit NatsClient(int port, const std::string& ca_file = "") {
    natsOptions* options = nullptr;
    const std::string url = "nats://127.0.0.1:" + std::to_string(port);
    natsStatus s = natsOptions_Create(&options);
    if (s == NATS_OK) s = natsOptions_SetURL(options, url.c_str());
    if (s == NATS_OK && !ca_file.empty()) s = natsOptions_SetSecure(options, true);
    if (s == NATS_OK && !ca_file.empty()) {
      s = natsOptions_LoadCATrustedCertificates(options, ca_file.c_str());
    }
    if (s == NATS_OK) s = natsConnection_Connect(&connection_, options);
    if (s == NATS_OK) s = natsConnection_JetStream(&js_, connection_, nullptr);
    natsOptions_Destroy(options);
    ok_ = s == NATS_OK;
  }
  ~NatsClient() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
  }
  bool ok() const { return ok_; }
  // Creates a stream over `subjects` (max_msg_size 0: no limit). True when created.
  bool AddStream(const std::string& name, const std::string& subjects, int32_t max_msg_size) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    const char* list[] = {subjects.c_str()};
    config.Name = name.c_str();
    config.Subjects = list;
    config.SubjectsLen = 1;
    if (max_msg_size > 0) config.MaxMsgSize = max_msg_size;
    jsStreamInfo* info = nullptr;
    natsStatus s = js_AddStream(&info, js_, &config, nullptr, nullptr);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return s == NATS_OK;
  }
  // Every message of the stream, in stream order.
  std::vector<Stored> Read(const std::string& stream) {
    std::vector<Stored> out;
    jsStreamInfo* info = nullptr;
    if (js_GetStreamInfo(&info, js_, stream.c_str(), nullptr, nullptr) != NATS_OK) return out;
    const uint64_t first = info->State.FirstSeq, last = info->State.LastSeq;
    jsStreamInfo_Destroy(info);
    for (uint64_t seq = first; seq <= last && last > 0; ++seq) {
      natsMsg* msg = nullptr;
      if (js_GetMsg(&msg, js_, stream.c_str(), seq, nullptr, nullptr) != NATS_OK) continue;
      Stored stored;
      stored.subject = natsMsg_GetSubject(msg);
      stored.data.assign(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
      const char** keys = nullptr;
      int count = 0;
      if (natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK) {
        for (int k = 0; k < count; ++k) {
          const char** values = nullptr;
          int n = 0;
          if (natsMsgHeader_Values(msg, keys[k], &values, &n) == NATS_OK) {
            for (int v = 0; v < n; ++v) stored.headers[keys[k]].push_back(values[v]);
            free(values);
          }
        }
        free(keys);
      }
      natsMsg_Destroy(msg);
      out.push_back(std::move(stored));
    }
    return out;
  }

 private:
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  bool ok_ = false;
};

}  // namespace wharf::testing
