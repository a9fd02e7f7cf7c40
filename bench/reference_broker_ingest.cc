#include "bench/reference_broker_ingest.h"

#include <hiredis/hiredis.h>
#include <nats/nats.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/producer_driver.h"
#include "bench/report_text.h"
#include "engine/relay/nats_sink.h"

namespace wharf::bench {
namespace {

// The facts connection `index` of `connections` publishes: its partitions' facts in turns, in id
// order within each partition.
std::vector<const W7Entry*> ConnectionOrder(const W7Facts& facts, int index, int connections) {
  std::vector<const std::vector<W7Entry>*> mine;
  size_t total = 0;
  for (size_t p = static_cast<size_t>(index); p < facts.by_partition.size();
       p += static_cast<size_t>(connections)) {
    mine.push_back(&facts.by_partition[p]);
    total += facts.by_partition[p].size();
  }
  std::vector<const W7Entry*> order;
  order.reserve(total);
  for (size_t i = 0; order.size() < total; ++i) {
    for (const std::vector<W7Entry>* partition : mine) {
      if (i < partition->size()) order.push_back(&(*partition)[i]);
    }
  }
  return order;
}

// Runs `connect(index)` then `publish(index)` on `connections` threads; the clock runs from when
// every thread has connected until the last publish returned. Returns "" or the first error.
template <typename Connect, typename Publish>
std::string RunConnections(int connections, Connect&& connect, Publish&& publish, double* seconds) {
  std::vector<std::string> errors(static_cast<size_t>(connections));
  std::latch connected(connections + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&, i] {
      std::string& error = errors[static_cast<size_t>(i)];
      error = connect(i);
      connected.arrive_and_wait();
      if (error.empty()) error = publish(i);
    });
  }
  connected.arrive_and_wait();
  const uint64_t start_ns = NowNs();
  for (std::thread& thread : threads) thread.join();
  *seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  for (const std::string& error : errors) {
    if (!error.empty()) return error;
  }
  return "";
}

// A number's decimal digits in a buffer of its own.
struct Decimal {
  char text[24];
  size_t size;
  explicit Decimal(uint64_t value) {
    size = static_cast<size_t>(std::to_chars(text, text + sizeof(text), value).ptr - text);
  }
  std::string_view view() const { return {text, size}; }
};

// Pipelines XADDs of `order` on `context`: two windows of kW7RedisWindow in flight, the replies
// of the older read while the newer is on its way.
std::string PipelineXadds(redisContext* context, const std::vector<const W7Entry*>& order) {
  std::vector<std::string> streams;
  size_t sent = 0, acked = 0;
  const char* argv[15];
  size_t lengths[15];
  while (acked < order.size()) {
    for (; sent < order.size() && sent - acked < 2 * kW7RedisWindow; ++sent) {
      const W7Entry& e = *order[sent];
      while (streams.size() <= e.partition) {
        streams.push_back(kW7RedisStreamPrefix + std::to_string(streams.size()));
      }
      const Decimal id(e.id), partition(e.partition), commit_ms(static_cast<uint64_t>(e.commit_ms));
      char entry_id[32];
      char* end = std::to_chars(entry_id, entry_id + 24, e.id).ptr;
      std::memcpy(end, "-0", 2);
      const std::string_view args[15] = {"XADD",
                                         streams[e.partition],
                                         {entry_id, static_cast<size_t>(end + 2 - entry_id)},
                                         "fact_id",
                                         id.view(),
                                         "type",
                                         e.type,
                                         "key",
                                         e.key,
                                         "payload",
                                         e.payload,
                                         "partition",
                                         partition.view(),
                                         "commit_ms",
                                         commit_ms.view()};
      for (int a = 0; a < 15; ++a) {
        argv[a] = args[a].data();
        lengths[a] = args[a].size();
      }
      if (redisAppendCommandArgv(context, 15, argv, lengths) != REDIS_OK) {
        return "redis: out of memory";
      }
    }
    int done = 0;
    while (!done) {
      if (redisBufferWrite(context, &done) != REDIS_OK) {
        return std::string("redis write: ") + context->errstr;
      }
    }
    for (const size_t until = std::min(sent, acked + kW7RedisWindow); acked < until; ++acked) {
      void* raw = nullptr;
      if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
        return std::string("redis read: ") + context->errstr;
      }
      auto* reply = static_cast<redisReply*>(raw);
      std::string error;
      if (reply->type != REDIS_REPLY_STRING) {
        error = "redis XADD of fact " + std::to_string(order[acked]->id) + ": " +
                (reply->type == REDIS_REPLY_ERROR ? std::string(reply->str, reply->len)
                                                  : "unexpected reply");
      }
      freeReplyObject(reply);
      if (!error.empty()) return error;
    }
  }
  return "";
}

// Failed acknowledgements of one connection's async publishes (nats.c's callback thread).
struct NatsAckErrors {
  std::mutex mutex;
  uint64_t count = 0;
  std::string first;
};

void OnNatsAckError(jsCtx*, jsPubAckErr* error, void* closure) {
  auto* errors = static_cast<NatsAckErrors*>(closure);
  std::lock_guard lock(errors->mutex);
  if (errors->count++ == 0) {
    errors->first = std::string(natsStatus_GetText(error->Err)) + " (" +
                    (error->ErrText != nullptr ? error->ErrText : "") + ")";
  }
}

// One connection's client: its JetStream context with the async publish bound.
struct NatsPublisher {
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  NatsAckErrors errors;
  ~NatsPublisher() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (connection != nullptr) natsConnection_Destroy(connection);
  }
};

std::string PublishNatsAsync(NatsPublisher& publisher, const std::vector<const W7Entry*>& order) {
  std::vector<std::string> subjects;
  const std::string id_prefix = std::string(kW7RelayName) + ":";
  for (const W7Entry* entry : order) {
    const W7Entry& e = *entry;
    while (subjects.size() <= e.partition) {
      subjects.push_back(kW7NatsSubjectPrefix + std::string(e.type) + "." +
                         std::to_string(subjects.size()));
    }
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subjects[e.partition].c_str(), nullptr, e.payload.data(),
                                  static_cast<int>(e.payload.size()));
    const std::string id = std::to_string(e.id);
    const std::string type(e.type), key(e.key);
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", (id_prefix + id).c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Fact-Id", id.c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Type", type.c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Wharf-Key", key.c_str());
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg, "Wharf-Partition", std::to_string(e.partition).c_str());
    }
    if (s == NATS_OK) {
      s = natsMsgHeader_Set(msg, "Wharf-Commit-Ms", std::to_string(e.commit_ms).c_str());
    }
    if (s == NATS_OK) s = js_PublishMsgAsync(publisher.js, &msg, nullptr);
    if (msg != nullptr) natsMsg_Destroy(msg);  // not taken by the library (failed)
    if (s != NATS_OK) return "nats publish of fact " + id + ": " + internal::NatsStatusText(s);
  }
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MaxWait = static_cast<int64_t>(kW7Timeout_s * 1000);
  natsStatus s = js_PublishAsyncComplete(publisher.js, &options);
  if (s != NATS_OK) return "nats: waiting for the acknowledgements: " + internal::NatsStatusText(s);
  std::lock_guard lock(publisher.errors.mutex);
  if (publisher.errors.count > 0) {
    return "nats: " + std::to_string(publisher.errors.count) +
           " publishes not acknowledged, the first: " + publisher.errors.first;
  }
  return "";
}

}  // namespace

std::string IngestRedisPipelined(const std::string& host, int port, const W7Facts& facts,
                                 int connections, double* seconds) {
  std::vector<redisContext*> contexts(static_cast<size_t>(connections), nullptr);
  std::string error = RunConnections(
      connections,
      [&](int i) -> std::string {
        redisContext*& context = contexts[static_cast<size_t>(i)];
        context = redisConnectWithTimeout(host.c_str(), port, timeval{10, 0});
        if (context == nullptr || context->err != 0) {
          return "redis connect: " + std::string(context != nullptr ? context->errstr : "");
        }
        redisSetTimeout(context, timeval{static_cast<time_t>(kW7Timeout_s), 0});
        return "";
      },
      [&](int i) {
        return PipelineXadds(contexts[static_cast<size_t>(i)],
                             ConnectionOrder(facts, i, connections));
      },
      seconds);
  for (redisContext* context : contexts) {
    if (context != nullptr) redisFree(context);
  }
  return error;
}

std::string IngestNatsAsync(const std::string& url, const W7Facts& facts, int connections,
                            double* seconds) {
  std::vector<NatsPublisher> publishers(static_cast<size_t>(connections));
  return RunConnections(
      connections,
      [&](int i) -> std::string {
        NatsPublisher& publisher = publishers[static_cast<size_t>(i)];
        jsOptions options;
        jsOptions_Init(&options);
        options.PublishAsync.MaxPending = kW7NatsMaxPending;
        // A publish finding MaxPending unacknowledged waits for room (default: fails after
        // 200 ms, which a slow sync of the server would hit).
        options.PublishAsync.StallWait = static_cast<int64_t>(kW7Timeout_s * 1000);
        options.PublishAsync.ErrHandler = OnNatsAckError;
        options.PublishAsync.ErrHandlerClosure = &publisher.errors;
        natsStatus s = natsConnection_ConnectTo(&publisher.connection, url.c_str());
        if (s == NATS_OK)
          s = natsConnection_JetStream(&publisher.js, publisher.connection, &options);
        return s == NATS_OK ? "" : "nats connect to " + url + ": " + internal::NatsStatusText(s);
      },
      [&](int i) {
        return PublishNatsAsync(publishers[static_cast<size_t>(i)],
                                ConnectionOrder(facts, i, connections));
      },
      seconds);
}

std::string DescribeW7Reference(W7Broker broker) {
  if (broker == W7Broker::kRedisStreams) {
    return Format(
        "redis_pipelined: hiredis, %d connection(s) (thread each), XADDs pipelined in 2 windows "
        "of %zu",
        kW7RedisConnections, kW7RedisWindow);
  }
  return Format(
      "nats_async: nats.c, %d connection(s) (thread each), js_PublishMsgAsync, at most %lld "
      "pending",
      kW7NatsConnections, static_cast<long long>(kW7NatsMaxPending));
}

}  // namespace wharf::bench
