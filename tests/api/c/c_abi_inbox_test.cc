// Inboxes (wharf.h INBOXES): an asynchronous subscriber whose deliveries a caller's loop takes in
// batches through an eventfd, and completes in batches. The tests run the loop on the test's
// thread: every fact arrives whole, in key order, the fd is readable exactly while deliveries are
// queued, a batch of completions moves the cursor, a RETRY in a batch delivers the fact again, a
// freed inbox hands its facts back, and bad input is refused.
#include <poll.h>

#include <map>

#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

class InboxTest : public CAbiTest {
 protected:
  void TearDown() override {
    wharf_inbox_free(inbox_);
    wharf_runtime_free(rt_);
    CAbiTest::TearDown();
  }

  void Subscribe(const char* options) {
    ASSERT_WHARF_OK(
        wharf_runtime_new(engine_, "workers=2;backoff_initial_ms=1;backoff_max_ms=5", &rt_));
    const char* types[] = {"A"};
    ASSERT_WHARF_OK(wharf_runtime_subscribe_inbox(rt_, "loop", types, 1, options, &inbox_));
    ASSERT_WHARF_OK(wharf_inbox_fd(inbox_, &fd_));
  }

  // Takes what is queued (waiting up to 10 s for the fd); appends the facts' copies.
  size_t TakeBatch(std::vector<wharf_inbox_fact>* facts, std::vector<std::string>* keys) {
    if (!Readable(fd_, 10000)) return 0;
    const wharf_inbox_fact* taken = nullptr;
    size_t count = 0;
    EXPECT_WHARF(WHARF_OK, wharf_inbox_take(inbox_, 0, &taken, &count));
    for (size_t i = 0; i < count; ++i) {
      facts->push_back(taken[i]);
      keys->emplace_back(static_cast<const char*>(taken[i].key), taken[i].key_len);
    }
    return count;
  }

  wharf_runtime* rt_ = nullptr;
  wharf_inbox* inbox_ = nullptr;
  int fd_ = -1;
};

TEST_F(InboxTest, DeliversInBatchesInKeyOrderAndCompletesInBatches) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 60; ++i) ids.push_back(Commit("A", "key-" + std::to_string(i % 6), "p"));
  Subscribe("key_concurrency=8");
  EXPECT_FALSE(Readable(fd_, 0));  // nothing queued before the start
  ASSERT_WHARF_OK(wharf_runtime_start(rt_));
  std::vector<wharf_inbox_fact> facts;
  std::vector<std::string> keys;
  std::map<std::string, uint64_t> last_of_key;
  size_t batches = 0;
  while (facts.size() < ids.size()) {
    const size_t before = facts.size();
    ASSERT_GT(TakeBatch(&facts, &keys), 0u) << "nothing arrived; " << facts.size() << " so far";
    ++batches;
    std::vector<wharf_delivery_result> results;
    for (size_t i = before; i < facts.size(); ++i) {
      EXPECT_GT(facts[i].id, last_of_key[keys[i]]) << keys[i];  // per key: in id order
      last_of_key[keys[i]] = facts[i].id;
      EXPECT_EQ(facts[i].attempt, 1u);
      results.push_back({facts[i].delivery, WHARF_HANDLED, nullptr});
    }
    size_t refused = 99;
    ASSERT_WHARF_OK(wharf_deliveries_done(results.data(), results.size(), &refused));
    EXPECT_EQ(refused, 0u);
  }
  EXPECT_LE(batches, facts.size());
  std::vector<uint64_t> got;
  for (const auto& f : facts) got.push_back(f.id);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, ids);
  ASSERT_WHARF_OK(wharf_runtime_stop(rt_));
  EXPECT_FALSE(Readable(fd_, 0));  // taken empty: the fd was reset
  uint64_t cursor = 0;
  uint64_t highest = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    ASSERT_WHARF_OK(wharf_cursor_get(engine_, "loop", p, &cursor));
    highest = std::max(highest, cursor);
  }
  EXPECT_EQ(highest, ids.back());  // the completions moved the cursors past every fact
}

TEST_F(InboxTest, ARetryInABatchDeliversTheFactAgain) {
  const uint64_t id = Commit("A", "k", "payload");
  Subscribe(nullptr);
  ASSERT_WHARF_OK(wharf_runtime_start(rt_));
  std::vector<wharf_inbox_fact> facts;
  std::vector<std::string> keys;
  ASSERT_EQ(TakeBatch(&facts, &keys), 1u);
  EXPECT_EQ(facts[0].id, id);
  EXPECT_EQ(std::string(static_cast<const char*>(facts[0].payload), facts[0].payload_len),
            "payload");
  EXPECT_STREQ(facts[0].type, "A");
  wharf_delivery_result retry{facts[0].delivery, WHARF_RETRY, "later"};
  ASSERT_WHARF_OK(wharf_deliveries_done(&retry, 1, nullptr));
  ASSERT_EQ(TakeBatch(&facts, &keys), 1u);
  EXPECT_EQ(facts[1].id, id);
  EXPECT_EQ(facts[1].attempt, 2u);
  // Done twice: the second completion is refused and counted, never an error.
  wharf_delivery_result done[2] = {{facts[1].delivery, WHARF_HANDLED, nullptr},
                                   {facts[1].delivery, WHARF_HANDLED, nullptr}};
  size_t refused = 0;
  ASSERT_WHARF_OK(wharf_deliveries_done(done, 2, &refused));
  EXPECT_EQ(refused, 1u);
}

TEST_F(InboxTest, AFreedInboxHandsItsFactsBack) {
  const uint64_t id = Commit("A", "k", "p");
  Subscribe(nullptr);
  ASSERT_WHARF_OK(wharf_runtime_start(rt_));
  ASSERT_TRUE(Readable(fd_, 10000));
  wharf_inbox_free(inbox_);  // the queued delivery is answered RETRY
  inbox_ = nullptr;
  wharf_runtime_free(rt_);
  rt_ = nullptr;
  // A new inbox of the same consumer gets the fact again.
  Subscribe(nullptr);
  ASSERT_WHARF_OK(wharf_runtime_start(rt_));
  std::vector<wharf_inbox_fact> facts;
  std::vector<std::string> keys;
  ASSERT_EQ(TakeBatch(&facts, &keys), 1u);
  EXPECT_EQ(facts[0].id, id);
  wharf_delivery_result done{facts[0].delivery, WHARF_HANDLED, nullptr};
  ASSERT_WHARF_OK(wharf_deliveries_done(&done, 1, nullptr));
}

TEST_F(InboxTest, BadInputIsRefused) {
  Subscribe(nullptr);
  const wharf_inbox_fact* facts = nullptr;
  size_t count = 0;
  int fd = -1;
  int not_an_inbox = 0;
  auto* made_up = reinterpret_cast<wharf_inbox*>(&not_an_inbox);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_inbox_take(made_up, 0, &facts, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_inbox_take(nullptr, 0, &facts, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_inbox_take(inbox_, 0, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_inbox_fd(made_up, &fd));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_inbox_fd(inbox_, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_deliveries_done(nullptr, 1, nullptr));
  wharf_delivery_result never_issued{123456789, WHARF_HANDLED, nullptr};
  size_t refused = 0;
  EXPECT_WHARF(WHARF_OK, wharf_deliveries_done(&never_issued, 1, &refused));
  EXPECT_EQ(refused, 1u);
  EXPECT_WHARF(WHARF_OK, wharf_inbox_take(inbox_, 0, &facts, &count));
  EXPECT_EQ(count, 0u);
  wharf_inbox_free(nullptr);
  wharf_inbox_free(made_up);  // not live: ignored
  wharf_inbox* second = nullptr;
  const char* types[] = {"A"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_subscribe_inbox(rt_, "bad", types, 1, "key_concurrency=0", &second));
  EXPECT_EQ(second, nullptr);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_subscribe_inbox(rt_, "bad", types, 1, nullptr, nullptr));
}

}  // namespace
}  // namespace wharf::cabi_test
