// C ABI: declared versions and upcasters (wharf_declare_type, wharf_register_upcaster).
#include <map>

#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

struct Seen {
  std::mutex mutex;
  std::map<std::string, std::pair<uint32_t, uint32_t>> by_payload;  // payload -> (v, stored_v)
};

wharf_outcome Record(void* ctx, const wharf_fact* fact) {
  auto* seen = static_cast<Seen*>(ctx);
  size_t len = 0;
  const void* payload = wharf_fact_payload(fact, &len);
  std::lock_guard lock(seen->mutex);
  seen->by_payload[std::string(static_cast<const char*>(payload), len)] = {
      wharf_fact_version(fact), wharf_fact_stored_version(fact)};
  return WHARF_HANDLED;
}

void CollectReason(void* ctx, const char*, const char* reason, const wharf_fact*) {
  static_cast<std::vector<std::string>*>(ctx)->push_back(reason);
}

TEST_F(CAbiTest, AChainLiftsEveryFactAndARefusalIsADeadLetter) {
  ASSERT_WHARF_OK(wharf_declare_type(engine_, "A", 1));
  Commit("A", "k", "one");
  Commit("A", "k", "poison");
  Commit("A", "k", "silent");
  ASSERT_WHARF_OK(wharf_declare_type(engine_, "A", 3));
  uint32_t version = 0;
  ASSERT_WHARF_OK(wharf_declared_version(engine_, "A", &version));
  EXPECT_EQ(version, 3u);
  Step two{"|v2"}, three{"|v3"};
  ASSERT_WHARF_OK(wharf_register_upcaster(engine_, "A", 1, Lift, &two, DestroyStep));
  {
    // A missing step fails the start, naming it.
    wharf_runtime* rt = nullptr;
    const char* types[] = {"A"};
    Seen seen;
    ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
    ASSERT_WHARF_OK(wharf_runtime_subscribe(rt, "mailer", types, 1, Record, &seen));
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(rt));
    EXPECT_NE(LastError().find("no upcaster lifts it from version 2 to 3"), std::string::npos)
        << LastError();
    wharf_runtime_free(rt);
  }
  ASSERT_WHARF_OK(wharf_register_upcaster(engine_, "A", 2, Lift, &three, DestroyStep));
  Commit("A", "k", "three");  // at the declared version: delivered as is

  Seen seen, stored;
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  ASSERT_WHARF_OK(wharf_runtime_subscribe(rt, "mailer", types, 1, Record, &seen));
  ASSERT_WHARF_OK(wharf_runtime_subscribe_v2(rt, "archive", types, 1, "payload_version=stored",
                                             Record, &stored, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(seen.by_payload.size(), 2u);
  EXPECT_EQ(seen.by_payload["one|v2|v3"], (std::pair<uint32_t, uint32_t>{3, 1}));
  EXPECT_EQ(seen.by_payload["three"], (std::pair<uint32_t, uint32_t>{3, 3}));
  EXPECT_EQ(stored.by_payload.size(), 4u);
  EXPECT_EQ(stored.by_payload["poison"], (std::pair<uint32_t, uint32_t>{1, 1}));
  std::vector<std::string> reasons;
  ASSERT_WHARF_OK(wharf_dead_letters(engine_, "mailer", CollectReason, &reasons));
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "upcast-failed: upcasting 'A' from version 1 to 2: poison cannot be read");
  EXPECT_EQ(reasons[1],
            "upcast-failed: upcasting 'A' from version 1 to 2: the upcaster returned WHARF_OK "
            "without a payload (wharf_upcast_result)");
  // Bad input is named; a refused registration releases its ctx at once.
  Step spare{"x"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_upcaster(engine_, "A", 1, Lift, &spare, DestroyStep));
  EXPECT_NE(LastError().find("already registered"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_upcaster(engine_, "B", 1, Lift, &spare, DestroyStep));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_upcaster(engine_, "A", 3, Lift, &spare, DestroyStep));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_upcaster(engine_, "A", 1, nullptr, &spare, DestroyStep));
  EXPECT_EQ(spare.destroyed.load(), 4);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_type(engine_, "A", 0));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_type(engine_, "A", 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_upcast_result(nullptr, "x", 1));
  // The engine lets go of its upcasters when it closes.
  EXPECT_EQ(two.destroyed.load(), 0);
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_EQ(two.destroyed.load(), 1);
  EXPECT_EQ(three.destroyed.load(), 1);
  engine_ = nullptr;
  Open();  // for TearDown
}

}  // namespace
}  // namespace wharf::cabi_test
