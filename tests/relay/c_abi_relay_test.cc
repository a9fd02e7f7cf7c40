// wharf_runtime_relay (the C ABI of relays) against a real redis-server: the options split into
// the consumer's and the sink's, bad ones are named, and the facts reach their streams.
#include <hiredis/hiredis.h>

#include "api/c/c_abi_fixture.h"
#include "tools/broker/broker_process.h"

namespace wharf::cabi_test {
namespace {

class CAbiRelayTest : public CAbiTest {
 protected:
  void SetUp() override {
    CAbiTest::SetUp();
    ASSERT_TRUE(redis_.Start()) << "redis-server did not start";
  }
  std::string Url() const { return "url=redis://127.0.0.1:" + std::to_string(redis_.port()); }
  long long StreamLength(const std::string& stream) {
    timeval tv{10, 0};
    redisContext* context = redisConnectWithTimeout("127.0.0.1", redis_.port(), tv);
    auto* reply = static_cast<redisReply*>(redisCommand(context, "XLEN %s", stream.c_str()));
    long long length = reply != nullptr ? reply->integer : -1;
    if (reply != nullptr) freeReplyObject(reply);
    redisFree(context);
    return length;
  }

  TempDir redis_dir_;
  broker::BrokerProcess redis_{
      [this](int port) { return broker::RedisArgv(redis_dir_.path(), port); }};
};

TEST_F(CAbiRelayTest, BadOptionsAreNamed) {
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  const char* types[] = {"A"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_relay(rt, "r", types, 1, nullptr));
  EXPECT_NE(LastError().find("options is NULL"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_relay(rt, "r", types, 1, "url=x"));
  EXPECT_NE(LastError().find("kind is missing"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_relay(rt, "r", types, 1, "kind=redis_streams;shard=3"));
  EXPECT_NE(LastError().find("unknown key 'shard'"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_relay(rt, "r", types, 1, "kind=redis_streams;batch_facts=zero"));
  EXPECT_NE(LastError().find("batch_facts"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_relay(rt, "r", types, 1, "kind=redis_streams;stream=one"));
  EXPECT_NE(LastError().find("stream='one'"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_relay(rt, "r", types, 0, "kind=redis_streams"));
  wharf_runtime_free(rt);
}

TEST_F(CAbiRelayTest, RelaysFactsToRedis) {
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  const char* types[] = {"A"};
  const std::string options =
      "kind=redis_streams;" + Url() + ";stream=capi:{type};ordering=global;batch_facts=5";
  ASSERT_WHARF_OK(wharf_runtime_relay(rt, "r", types, 1, options.c_str()));
  for (int i = 0; i < 23; ++i) Commit(i % 3 == 0 ? "B" : "A", "k" + std::to_string(i), "p");
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  EXPECT_EQ(StreamLength("capi:A"), 15);  // the A facts, one stream (ordering=global)
  wharf_runtime_free(rt);
}

}  // namespace
}  // namespace wharf::cabi_test
