// The C ABI's engine and transactions (wharf.h): commit and read, concurrent commits racing a
// close, emit_v2 headers, deliver_at and version, delayed facts and their scheduled id, async
// commit, fact accessors outside their callback, and binary keys with UTF-8 names.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/c/c_abi_fixture.h"

namespace {

using namespace wharf::cabi_test;

// ---------------------------------------------------------------------------------------------
// Transactions

TEST_F(CAbiTest, CommitAndRead) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-1", 3, "{\"total\":12}", 12));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-2", 3, nullptr, 0));  // empty value
  ASSERT_WHARF_OK(wharf_txn_put(txn, "gone", "x", 1, "1", 1));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "customer-7", 10, "created", 7));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "B", nullptr, 0, "unkeyed", 7));
  // Reads inside a transaction see its own writes (over its snapshot).
  void* value = nullptr;
  size_t len = 0;
  ASSERT_WHARF_OK(wharf_txn_get(txn, "orders", "o-1", 3, &value, &len));
  EXPECT_EQ(std::string(static_cast<const char*>(value), len), "{\"total\":12}");
  wharf_free(value);
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_txn_get(txn, "orders", "o-3", 3, &value, &len));
  uint64_t last = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &last));
  EXPECT_EQ(last, 2u);
  uint64_t durable = 0;
  ASSERT_WHARF_OK(wharf_durable_lsn(engine_, &durable));
  EXPECT_GE(durable, last);

  EXPECT_EQ(Get("orders", "o-1"), "{\"total\":12}");
  ASSERT_WHARF_OK(wharf_get(engine_, "orders", "o-2", 3, &value, &len));
  EXPECT_NE(value, nullptr);  // never NULL, also for an empty value
  EXPECT_EQ(len, 0u);
  wharf_free(value);

  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_delete(txn, "gone", "x", 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &last));
  EXPECT_EQ(last, 0u);  // no facts
  EXPECT_EQ(Get("gone", "x"), "<not found>");

  // Aborted transactions leave nothing.
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-3", 3, "x", 1));
  wharf_txn_abort(txn);
  EXPECT_EQ(Get("orders", "o-3"), "<not found>");

  // And everything committed survives a reopen.
  Reopen();
  EXPECT_EQ(Get("orders", "o-1"), "{\"total\":12}");
  std::vector<std::string> facts;
  auto collect = [](void* ctx, const wharf_fact* fact) {
    size_t type_len = 0;
    size_t payload_len = 0;
    const char* type = wharf_fact_type(fact, &type_len);
    const void* payload = wharf_fact_payload(fact, &payload_len);
    static_cast<std::vector<std::string>*>(ctx)->push_back(
        std::string(type, type_len) + ":" +
        std::string(static_cast<const char*>(payload), payload_len));
  };
  uint32_t partitions = 0;
  ASSERT_WHARF_OK(wharf_partitions(engine_, &partitions));
  for (uint32_t p = 0; p < partitions; ++p) {
    ASSERT_WHARF_OK(wharf_read_facts(engine_, p, 0, 100, collect, &facts, nullptr));
  }
  std::sort(facts.begin(), facts.end());
  EXPECT_EQ(facts, (std::vector<std::string>{"A:created", "B:unkeyed"}));
}

// wharf_close while other threads commit: they see OK until the close and CLOSED after it (or,
// for a transaction caught between, an unknown-outcome-free refusal); nothing crashes or hangs.
TEST(CAbiConcurrency, CloseWhileOtherThreadsCommit) {
  TempDir dir;
  wharf_engine* engine = nullptr;
  ASSERT_WHARF_OK(wharf_open(dir.db().c_str(), "durability=buffered", &engine));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_declare_types(engine, types, 1));
  std::atomic<int> commits{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        wharf_txn* txn = nullptr;
        wharf_status s = wharf_txn_begin(engine, &txn);
        if (s == WHARF_CLOSED) return;
        if (s != WHARF_OK) {
          unexpected++;
          return;
        }
        std::string key = std::to_string(t) + "-" + std::to_string(i);
        s = wharf_txn_put(txn, "t", key.data(), key.size(), "v", 1);
        if (s == WHARF_OK) s = wharf_txn_emit(txn, "A", key.data(), key.size(), "p", 1);
        if (s != WHARF_OK && s != WHARF_CLOSED) unexpected++;
        s = wharf_txn_commit(txn, nullptr);
        if (s == WHARF_OK) {
          commits++;
        } else if (s != WHARF_CLOSED) {
          unexpected++;
        }
      }
    });
  }
  while (commits.load() < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_WHARF(WHARF_OK, wharf_close(engine));
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(unexpected.load(), 0);
}

TEST_F(CAbiTest, EmitV2HeadersDeliverAtAndVersion) {
  ASSERT_WHARF_OK(wharf_declare_type(engine_, "A", 7));
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  const char* names[] = {"trace-id", "content-type"};
  const void* values[] = {"abc", "application/json"};
  size_t lens[] = {3, 16};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, nullptr, values, lens, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, nullptr, lens, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, nullptr, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, lens, 1000, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, lens, 2, -5, 1));
  const char* null_name[] = {nullptr};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, null_name, values, lens, 1, 0, 1));
  ASSERT_WHARF_OK(
      wharf_txn_emit_v2(txn, "A", "k", 1, "with-headers", 12, names, values, lens, 2, 0, 7));
  // Far in the future: held as a timer, not in the outbox yet.
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", "k", 1, "later", 5, nullptr, nullptr, nullptr, 0,
                                    INT64_C(4102444800000), 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));

  struct Seen {
    std::vector<std::string> payloads;
    std::vector<std::string> headers;
    uint32_t version = 0;
  } seen;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 100,
      [](void* ctx, const wharf_fact* fact) {
        auto* s = static_cast<Seen*>(ctx);
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        s->payloads.emplace_back(static_cast<const char*>(payload), len);
        s->version = wharf_fact_version(fact);
        for (size_t i = 0; i < wharf_fact_header_count(fact); ++i) {
          const char* name = nullptr;
          const void* value = nullptr;
          size_t value_len = 0;
          EXPECT_EQ(wharf_fact_header(fact, i, &name, nullptr, &value, &value_len), WHARF_OK);
          s->headers.push_back(std::string(name) + "=" +
                               std::string(static_cast<const char*>(value), value_len));
        }
        EXPECT_EQ(wharf_fact_header(fact, 99, nullptr, nullptr, nullptr, nullptr), WHARF_NOT_FOUND);
        EXPECT_EQ(wharf_fact_partition(fact), wharf_fact_partition(fact));
        EXPECT_EQ(wharf_fact_deliver_at_ms(fact), 0);
        EXPECT_EQ(wharf_fact_scheduled_id(fact), 0u);
        EXPECT_GT(wharf_fact_commit_ms(fact), 0);
        size_t source_len = 9;
        EXPECT_STREQ(wharf_fact_source(fact, &source_len), "");
        EXPECT_EQ(source_len, 0u);
      },
      &seen, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(seen.payloads, (std::vector<std::string>{"with-headers"}));
  EXPECT_EQ(seen.headers,
            (std::vector<std::string>{"trace-id=abc", "content-type=application/json"}));
  EXPECT_EQ(seen.version, 7u);
}

// A delayed fact is released under a new id and carries the id the commit returned
// (wharf_fact_scheduled_id).
TEST_F(CAbiTest, DelayedFactCarriesItsScheduledId) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", "k", 1, "later", 5, nullptr, nullptr, nullptr, 0,
                                    /*deliver_at_ms=*/1, 1));
  uint64_t scheduled_id = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &scheduled_id));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "now", 3));
  uint64_t now_id = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &now_id));
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  size_t released = 0;
  ASSERT_WHARF_OK(wharf_runtime_release_timers(rt, &released));
  EXPECT_EQ(released, 1u);
  wharf_runtime_free(rt);
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  struct Seen {
    std::vector<std::pair<uint64_t, uint64_t>> ids;  // (id, scheduled id)
  } seen;
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) {
        static_cast<Seen*>(ctx)->ids.emplace_back(wharf_fact_id(fact),
                                                  wharf_fact_scheduled_id(fact));
      },
      &seen, &count));
  ASSERT_EQ(seen.ids.size(), 2u);
  EXPECT_EQ(seen.ids[0], std::make_pair(now_id, uint64_t{0}));
  EXPECT_GT(seen.ids[1].first, now_id);
  EXPECT_EQ(seen.ids[1].second, scheduled_id);
}

TEST_F(CAbiTest, CommitAsyncCallsBackOnceOnAnEngineThread) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable cv;
    int calls = 0;
    wharf_status status = WHARF_INTERNAL;
    uint64_t first = 0;
    uint64_t last = 0;
    std::thread::id thread;
    wharf_status close_from_callback = WHARF_OK;
  } outcome;
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "one", 3));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "two", 3));
  wharf_engine* engine = engine_;
  static wharf_engine* s_engine;
  s_engine = engine;
  ASSERT_WHARF_OK(wharf_txn_commit_async(
      txn,
      [](void* ctx, wharf_status status, uint64_t first, uint64_t last) {
        auto* o = static_cast<Outcome*>(ctx);
        // Calls that would deadlock on an engine thread are refused, not hung.
        wharf_status close_status = wharf_close(s_engine);
        std::lock_guard lock(o->mutex);
        o->close_from_callback = close_status;
        o->calls++;
        o->status = status;
        o->first = first;
        o->last = last;
        o->thread = std::this_thread::get_id();
        o->cv.notify_all();
      },
      &outcome));
  {
    std::unique_lock lock(outcome.mutex);
    ASSERT_TRUE(
        outcome.cv.wait_for(lock, std::chrono::seconds(30), [&] { return outcome.calls > 0; }));
  }
  EXPECT_EQ(outcome.status, WHARF_OK);
  EXPECT_EQ(outcome.first, 1u);
  EXPECT_EQ(outcome.last, 2u);
  EXPECT_NE(outcome.thread, std::this_thread::get_id());
  EXPECT_EQ(outcome.close_from_callback, WHARF_INVALID_ARGUMENT);
  // Committed async: consumed; fn NULL: refused and consumed too.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit_async(txn, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit_async(txn, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(txn, nullptr));
  std::lock_guard lock(outcome.mutex);
  EXPECT_EQ(outcome.calls, 1);
}

// Facts are views valid during their callback only; afterwards accessors answer 0/NULL.
TEST_F(CAbiTest, FactAccessorsOutsideTheirCallback) {
  Commit("A", "k", "payload");
  const wharf_fact* kept = nullptr;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) { *static_cast<const wharf_fact**>(ctx) = fact; },
      &kept, nullptr));
  ASSERT_NE(kept, nullptr);
  size_t len = 7;
  EXPECT_EQ(wharf_fact_id(kept), 0u);
  EXPECT_EQ(wharf_fact_type(kept, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_NE(LastError().find("only valid during the callback"), std::string::npos) << LastError();
  EXPECT_EQ(wharf_fact_payload(nullptr, &len), nullptr);
  EXPECT_EQ(wharf_fact_key(nullptr, nullptr), nullptr);
  EXPECT_EQ(wharf_fact_partition(nullptr), 0u);
  EXPECT_EQ(wharf_fact_depth(nullptr), 0u);
  EXPECT_EQ(wharf_fact_version(nullptr), 0u);
  EXPECT_EQ(wharf_fact_commit_ms(nullptr), 0);
  EXPECT_EQ(wharf_fact_deliver_at_ms(nullptr), 0);
  EXPECT_EQ(wharf_fact_scheduled_id(nullptr), 0u);
  EXPECT_EQ(wharf_fact_header_count(nullptr), 0u);
  EXPECT_EQ(wharf_fact_source(nullptr, &len), nullptr);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_fact_header(kept, 0, nullptr, nullptr, nullptr, nullptr));
}

// Keys, payloads and header values are bytes: NUL bytes and big-endian integers are taken whole
// through wharf_txn_put/get/delete, wharf_get, wharf_txn_emit_v2 and the fact accessors. Names
// are NUL-terminated (they cannot carry a NUL) and must be UTF-8.
TEST_F(CAbiTest, BinaryKeysAndUtf8Names) {
  const std::string key("\0\0\0\0\0\0\x01\x00", 8), other("\0\0\0\0\0\0\x01", 7);
  const std::string value("v\0w", 3), header("\0h", 2);
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", key.data(), key.size(), value.data(), value.size()));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", other.data(), other.size(), "o", 1));
  const char* names[] = {"h"};
  const void* values[] = {header.data()};
  const size_t lens[] = {header.size()};
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", key.data(), key.size(), value.data(), value.size(),
                                    names, values, lens, 1, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "\xff", "k", 1, "v", 1));
  EXPECT_NE(LastError().find("table name 0xff is not valid UTF-8"), std::string::npos)
      << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "A\xe2\x82", "k", 1, "p", 1));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(Get("t", key), value);
  EXPECT_EQ(Get("t", other), "o");

  struct Seen {
    std::string key, payload, header;
  } seen;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, key.data(), key.size(), &partition));
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) {
        auto* out = static_cast<Seen*>(ctx);
        size_t len = 0;
        const void* data = wharf_fact_key(fact, &len);
        out->key.assign(static_cast<const char*>(data), len);
        data = wharf_fact_payload(fact, &len);
        out->payload.assign(static_cast<const char*>(data), len);
        const char* name = nullptr;
        size_t name_len = 0;
        if (wharf_fact_header(fact, 0, &name, &name_len, &data, &len) == WHARF_OK) {
          out->header.assign(static_cast<const char*>(data), len);
        }
      },
      &seen, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(seen.key, key);
  EXPECT_EQ(seen.payload, value);
  EXPECT_EQ(seen.header, header);

  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_delete(txn, "t", key.data(), key.size()));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(Get("t", key), "<not found>");
  EXPECT_EQ(Get("t", other), "o");
  const char* bad_types[] = {"\xc0\x80"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(engine_, bad_types, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_set(engine_, "c\xff", 0));
}

}  // namespace
