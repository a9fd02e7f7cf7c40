#include "bench/w7_broker.h"

#include <hiredis/hiredis.h>
#include <nats/nats.h>

#include "engine/relay/nats_sink.h"

namespace wharf::bench {
namespace {

std::string CountRedis(int port, uint32_t partitions, uint64_t* stored) {
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, timeval{10, 0});
  if (context == nullptr || context->err != 0) {
    std::string error = "redis connect: " + std::string(context != nullptr ? context->errstr : "");
    if (context != nullptr) redisFree(context);
    return error;
  }
  std::string error;
  *stored = 0;
  for (uint32_t p = 0; p < partitions && error.empty(); ++p) {
    const std::string stream = kW7RedisStreamPrefix + std::to_string(p);
    auto* reply = static_cast<redisReply*>(redisCommand(context, "XLEN %s", stream.c_str()));
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
      error = "redis XLEN " + stream + " failed";
    } else {
      *stored += static_cast<uint64_t>(reply->integer);
    }
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(context);
  return error;
}

// Connects to the NATS at `url` and runs `action(js)`; returns "" or the first failure's text.
template <typename Action>
std::string WithJetStream(const std::string& url, Action&& action) {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  natsStatus s = natsConnection_ConnectTo(&connection, url.c_str());
  if (s == NATS_OK) s = natsConnection_JetStream(&js, connection, nullptr);
  if (s == NATS_OK) s = action(js);
  std::string error = s == NATS_OK ? "" : internal::NatsStatusText(s);
  if (js != nullptr) jsCtx_Destroy(js);
  if (connection != nullptr) natsConnection_Destroy(connection);
  return error;
}

}  // namespace

W7BrokerServer::W7BrokerServer(W7Broker kind, const std::string& scratch_root)
    : kind_(kind),
      dir_(scratch_root, kind == W7Broker::kRedisStreams ? "redis-w7-" : "nats-w7-"),
      process_([this](int port) {
        return kind_ == W7Broker::kRedisStreams ? broker::RedisArgv(dir_.path(), port)
                                                : broker::NatsArgv(dir_.path(), port);
      }) {}

std::string W7BrokerServer::Start() {
  if (dir_.path().empty()) return dir_.error();
  if (!process_.Start()) {
    return std::string(kind_ == W7Broker::kRedisStreams ? "redis-server" : "nats-server") +
           " did not start (installed? on the PATH?)";
  }
  if (kind_ == W7Broker::kRedisStreams) return "";
  std::string error = WithJetStream(url(), [](jsCtx* js) {
    const std::string subjects = std::string(kW7NatsSubjectPrefix) + ">";
    const char* subject_list[] = {subjects.c_str()};
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = kW7NatsStream;
    config.Subjects = subject_list;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    jsStreamInfo* info = nullptr;
    natsStatus s = js_AddStream(&info, js, &config, nullptr, nullptr);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return s;
  });
  return error.empty() ? "" : "nats: creating stream " + std::string(kW7NatsStream) + ": " + error;
}

std::string W7BrokerServer::url() const {
  return (kind_ == W7Broker::kRedisStreams ? "redis://127.0.0.1:" : "nats://127.0.0.1:") +
         std::to_string(port());
}

double W7BrokerServer::CpuSeconds() const { return ProcessCpuSecondsOf(process_.pid()); }

std::string W7BrokerServer::CountStored(uint32_t partitions, uint64_t* stored) const {
  if (kind_ == W7Broker::kRedisStreams) return CountRedis(port(), partitions, stored);
  std::string error = WithJetStream(url(), [stored](jsCtx* js) {
    jsStreamInfo* info = nullptr;
    natsStatus s = js_GetStreamInfo(&info, js, kW7NatsStream, nullptr, nullptr);
    if (s == NATS_OK) *stored = info->State.Msgs;
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return s;
  });
  return error.empty() ? "" : "nats: stream info of " + std::string(kW7NatsStream) + ": " + error;
}

}  // namespace wharf::bench
