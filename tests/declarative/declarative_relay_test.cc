// A relay declared in a YAML runtime file alone, end to end against a real redis-server (issue
// 23): the engine and the runtime take `config=FILE` and nothing else (no consumer registered in
// code), and every fact reaches its partition's stream in id order, once. The Redis server
// requires a password holding ';' and blanks, which the file carries as written (an option
// string could not). The relay shows in the metrics as kind "relay".
#include <hiredis/hiredis.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using broker::BrokerProcess;
using testing::CursorsReach;
using testing::FactsOf;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;
constexpr const char* kPassword = "s3cret; with blanks";

// The entry ids and fact_id fields of `stream`, in stream order.
std::vector<std::pair<std::string, std::string>> ReadStream(int port, const std::string& stream) {
  std::vector<std::pair<std::string, std::string>> out;
  timeval tv{10, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (context == nullptr || context->err != 0) {
    ADD_FAILURE() << "cannot connect to redis";
    if (context != nullptr) redisFree(context);
    return out;
  }
  auto* auth = static_cast<redisReply*>(redisCommand(context, "AUTH %s", kPassword));
  EXPECT_TRUE(auth != nullptr && auth->type == REDIS_REPLY_STATUS);
  if (auth != nullptr) freeReplyObject(auth);
  auto* reply = static_cast<redisReply*>(redisCommand(context, "XRANGE %s - +", stream.c_str()));
  if (reply != nullptr && reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* item = reply->element[i];
      std::string fact_id;
      const redisReply* fields = item->element[1];
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        if (std::string(fields->element[f]->str) == "fact_id") {
          fact_id.assign(fields->element[f + 1]->str, fields->element[f + 1]->len);
        }
      }
      out.emplace_back(std::string(item->element[0]->str, item->element[0]->len), fact_id);
    }
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(context);
  return out;
}

TEST(DeclarativeRelayEndToEnd, AFileAloneRelaysIntoRedis) {
  TempDir dir, redis_dir;
  BrokerProcess redis([&](int port) {
    std::vector<std::string> argv = broker::RedisArgv(redis_dir.path(), port);
    argv.insert(argv.end(), {"--requirepass", kPassword});
    return argv;
  });
  ASSERT_TRUE(redis.Start()) << "redis-server did not start (is it installed?)";
  const std::string file = dir.path() + "/app.yaml";
  std::ofstream(file) << "outbox:\n"
                         "  partitions: "
                      << kPartitions
                      << "\n"
                         "pools:\n"
                         "  pool.relays: {workers: 2}\n"
                         "runtime:\n"
                         "  outboxes:\n"
                         "    op.orders:\n"
                         "      input.orders:\n"
                         "        delivery: at_least_once\n"
                         "        partitioning:\n"
                         "          kind: keyed\n"
                         "          mapping: {schema.OrderCreated: [tenant_id]}\n"
                         "        ordering: partition\n"
                         "        dispatch:\n"
                         "          pool: pool.relays\n"
                         "          member_assignment: {kind: consistent_hash}\n"
                         "consumers:\n"
                         "  - id: orders-to-redis\n"
                         "    kind: relay\n"
                         "    input: op.orders/input.orders\n"
                         "    batch_facts: 7\n"
                         "    relay:\n"
                         "      kind: redis_streams\n"
                         "      url: redis://127.0.0.1:"
                      << redis.port()
                      << "\n"
                         "      stream: \"orders:{partition}\"\n"
                         "      password: \""
                      << kPassword << "\"\n";

  EngineOptions engine_options;
  ASSERT_OK(ParseEngineOptions("config=" + file, &engine_options));
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), engine_options, &engine));
  RuntimeOptions options = testing::RelayRuntimeOptions();
  ASSERT_OK(ParseRuntimeOptions("config=" + file, &options));
  {
    Runtime runtime(engine.get(), options);
    // No producer declared OrderCreated yet: Start fails naming the relay's type (registered from
    // the file), and succeeds once it is declared.
    Status s = runtime.Start();
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("takes fact type 'OrderCreated'"), std::string::npos)
        << s.ToString();
    ASSERT_OK(engine->DeclareTypes({"OrderCreated"}));
    ASSERT_OK(runtime.Start());
    for (int n = 0; n < 120; ++n) {
      Txn txn = engine->Begin();
      ASSERT_OK(txn.Emit(
          "OrderCreated", "",
          R"({"tenant_id": "t)" + std::to_string(n % 9) + R"(", "n": )" + std::to_string(n) + "}"));
      ASSERT_OK(txn.Commit());
    }
    std::map<uint32_t, std::vector<Fact>> expected = FactsOf(*engine, "OrderCreated", kPartitions);
    EXPECT_GT(expected.size(), 1u);  // the keys spread over partitions
    ASSERT_TRUE(CursorsReach(*engine, "orders-to-redis", expected));

    MetricsSnapshot metrics;
    ASSERT_OK(ReadMetrics(*engine, &metrics));
    ASSERT_EQ(metrics.consumers.size(), 1u);
    EXPECT_EQ(metrics.consumers[0].consumer, "orders-to-redis");
    EXPECT_EQ(metrics.consumers[0].kind, "relay");
    // A runtime without a configured instance is "default" in the metrics.
    const std::string info =
        "wharf_consumer_info{consumer=\"orders-to-redis\",runtime=\"default\",kind=\"relay\"} 1";
    const std::string text = ToPrometheusText(metrics);
    EXPECT_NE(text.find(info), std::string::npos) << info << "\n" << text;
    ASSERT_OK(runtime.Stop());

    size_t total = 0;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      auto entries = ReadStream(redis.port(), "orders:" + std::to_string(p));
      const std::vector<Fact>& facts = expected[p];
      ASSERT_EQ(entries.size(), facts.size()) << "partition " << p;
      for (size_t i = 0; i < facts.size(); ++i) {
        EXPECT_EQ(entries[i].first, std::to_string(facts[i].id) + "-0");
        EXPECT_EQ(entries[i].second, std::to_string(facts[i].id));
      }
      total += entries.size();
    }
    EXPECT_EQ(total, 120u);
  }
  ASSERT_OK(engine->Close());
}

// Goal: RuntimeOptions::register_at_start (what `config=FILE` sets) runs at Start; a failure
// drops the consumers it registered, so that the next Start runs it again without a duplicate
// (E026), and once it succeeded it is not called again (not by Drain either).
TEST(RegisterAtStartTest, FailureDropsItsConsumersAndRunsAgain) {
  TempDir dir;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), {}, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));
  RuntimeOptions options = testing::RelayRuntimeOptions();
  int calls = 0;
  options.register_at_start = [&calls](Runtime& runtime) {
    ++calls;
    Status s = runtime.Subscribe("s", {"A"}, [](const Fact&) { return Outcome::kHandled; });
    if (!s.ok()) return s;
    return calls == 1 ? Status::InvalidArgument("the first call fails") : Status::OK();
  };
  {
    Runtime runtime(engine.get(), options);
    Status s = runtime.Start();
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_EQ(s.message(), "the first call fails");
    ASSERT_OK(runtime.Start());
    ASSERT_OK(runtime.Drain());
    EXPECT_EQ(calls, 2);
    ASSERT_OK(runtime.Stop());
  }
  ASSERT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
