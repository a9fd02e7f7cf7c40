// The C ABI's cursor administration (wharf.h): get, set, copy, delete and list, with their
// error paths. (Dead-letter purge and lease release: c_admin_ops_test.cc.)
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
// Cursors

TEST_F(CAbiTest, Cursors) {
  uint64_t first = Commit("A", "k", "1");
  uint64_t second = Commit("A", "k", "2");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "store-requests", a, 1, ProjectCount, &counter));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t position = 0;
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-requests", partition, &position));
  EXPECT_EQ(position, second);
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "nobody", partition, &position));
  EXPECT_EQ(position, 0u);

  ASSERT_WHARF_OK(wharf_cursor_copy(engine_, "store-requests", "store-reviews"));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, second);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, "store-requests",
                                                         "store-reviews"));  // exists
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_cursor_copy(engine_, "nobody", "x"));
  ASSERT_WHARF_OK(wharf_cursor_set(engine_, "store-reviews", first));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, first);
  ASSERT_WHARF_OK(wharf_cursor_copy_v2(engine_, "store-requests", "store-reviews", 1));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, second);

  struct Rows {
    std::vector<std::string> rows;
  } rows;
  ASSERT_WHARF_OK(wharf_cursor_list(
      engine_,
      [](void* ctx, const char* consumer, uint32_t p, uint64_t id, uint64_t) {
        static_cast<Rows*>(ctx)->rows.push_back(std::string(consumer) + "/" + std::to_string(p) +
                                                "=" + std::to_string(id));
      },
      &rows));
  std::string expected_tail = "/" + std::to_string(partition) + "=" + std::to_string(second);
  EXPECT_NE(std::find(rows.rows.begin(), rows.rows.end(), "store-requests" + expected_tail),
            rows.rows.end());
  EXPECT_NE(std::find(rows.rows.begin(), rows.rows.end(), "store-reviews" + expected_tail),
            rows.rows.end());

  ASSERT_WHARF_OK(wharf_cursor_delete(engine_, "store-reviews"));
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_cursor_delete(engine_, "store-reviews"));

  // Error paths.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(nullptr, "c", 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, nullptr, 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "", 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "c", 0, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "c", 4, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, nullptr, "x"));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, "x", ""));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy_v2(engine_, "a", "b", 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_set(engine_, nullptr, 0));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_delete(engine_, ""));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_list(engine_, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_list(nullptr, nullptr, nullptr));
}

}  // namespace
