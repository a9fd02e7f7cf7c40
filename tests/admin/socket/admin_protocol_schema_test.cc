// The admin socket's messages come from one field list per type (engine/wire/schema.h): every
// op's reply, with every field of those lists set to a value other than its default, decodes to
// what was encoded (a field read or written in one direction only would show); every op's request
// round-trips the same way; and a line of another protocol version is refused on both sides,
// naming both versions.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/admin/socket/protocol.h"
#include "engine/wire/schema.h"
#include "test_util.h"

namespace wharf::internal::admin_socket {
namespace {

// Sets every field a Describe lists to a value that differs from every other one and from its
// default (counters from 1 up, bools to `flag`), and every list to two entries.
struct Filler {
  bool flag = true;
  uint64_t next = 1;

  template <class T>
  void operator()(const char*, T& member) {
    Fill(member);
  }
  void Hex(const char*, std::string& bytes) { bytes = std::string("\0\xff\n", 3) + Text(); }
  void HexPairs(const char* name, std::vector<std::pair<std::string, std::string>>& pairs,
                const char*, const char*) {
    pairs.resize(2);
    for (auto& [a, b] : pairs) {
      Hex(name, a);
      Hex(name, b);
    }
  }

  std::string Text() { return "m\xc3\xa9ller \"" + std::to_string(next++) + "\"\n"; }

  template <class T>
  void Fill(T& member) {
    if constexpr (std::is_same_v<T, bool>) {
      member = flag;
    } else if constexpr (std::is_floating_point_v<T>) {
      member = 0.1 * static_cast<double>(next++);
    } else if constexpr (std::is_integral_v<T>) {
      // Near the top of the type's range for some values: the reader must not narrow them.
      const uint64_t n = next++;
      member = n % 3 == 0 ? static_cast<T>(std::numeric_limits<T>::max() - static_cast<T>(n % 100))
                          : static_cast<T>(n);
    } else if constexpr (std::is_same_v<T, std::string>) {
      member = Text();
    } else if constexpr (requires { member.resize(2); }) {
      member.resize(2);
      for (auto& item : member) Fill(item);
    } else {
      wire::Describe(*this, member);
    }
  }
};

Reply Filled(bool flag) {
  Filler fill{flag};
  Reply reply;
  fill.Fill(reply.version);
  fill.Fill(reply.path);
  fill.Fill(reply.cursors);
  fill.Fill(reply.fact_id);
  fill.Fill(reply.moves);
  fill.Fill(reply.dead_letters);
  fill.Fill(reply.retried);
  fill.Fill(reply.purged);
  fill.Fill(reply.trim);
  fill.Fill(reply.losses);
  fill.Fill(reply.leases);
  fill.Fill(reply.stat);
  fill.Fill(reply.metrics);
  fill.Hex("value", reply.value);
  fill.HexPairs("rows", reply.rows, "", "");
  reply.more = flag;
  fill.Hex("resume_from", reply.resume_from);
  fill.Fill(reply.backup);
  fill.Fill(reply.migrate);
  return reply;
}

Status Decode(Op op, std::string line, Reply* reply) {
  EXPECT_EQ(line.back(), '\n');
  line.pop_back();
  bool progress = true;
  uint64_t done = 0, total = 0;
  Status s = DecodeReply(op, line, &progress, &done, &total, reply);
  EXPECT_FALSE(progress);
  return s;
}

TEST(AdminProtocolSchemaTest, EveryReplyFieldOfEveryOpRoundTrips) {
  for (bool flag : {true, false}) {
    const Reply reply = Filled(flag);
    for (int op = 0; op <= static_cast<int>(kLastOp); ++op) {
      SCOPED_TRACE(OpName(static_cast<Op>(op)) + std::string(flag ? " (true)" : " (false)"));
      const std::string line = EncodeReply(static_cast<Op>(op), reply);
      Reply decoded;
      ASSERT_OK(Decode(static_cast<Op>(op), line, &decoded));
      // Whatever the op's result holds, written again from what was read, is the same line.
      EXPECT_EQ(EncodeReply(static_cast<Op>(op), decoded), line);
    }
  }
  // The reply holds what was filled in (a spot check that the filler reached nested lists).
  Reply decoded;
  const Reply reply = Filled(true);
  ASSERT_OK(Decode(Op::kStat, EncodeReply(Op::kStat, reply), &decoded));
  ASSERT_EQ(decoded.stat.consumers.size(), 2u);
  ASSERT_EQ(decoded.stat.consumers[1].partitions.size(), 2u);
  EXPECT_EQ(decoded.stat.consumers[1].partitions[1].oldest_commit_ms,
            reply.stat.consumers[1].partitions[1].oldest_commit_ms);
  EXPECT_EQ(decoded.stat.consumers[0].last_error, reply.stat.consumers[0].last_error);
  ASSERT_OK(Decode(Op::kMetrics, EncodeReply(Op::kMetrics, reply), &decoded));
  EXPECT_EQ(decoded.metrics.consumers[0].instance, reply.metrics.consumers[0].instance);
  EXPECT_EQ(decoded.metrics.store.write_stall_seconds_total,
            reply.metrics.store.write_stall_seconds_total);
  EXPECT_NE(decoded.metrics.store.write_stall_seconds_total, 0);
  ASSERT_OK(Decode(Op::kMigrate, EncodeReply(Op::kMigrate, reply), &decoded));
  EXPECT_EQ(decoded.migrate.version, reply.migrate.version);
  EXPECT_EQ(decoded.migrate.batches, reply.migrate.batches);
  EXPECT_EQ(decoded.migrate.resume_from, reply.migrate.resume_from);
  EXPECT_TRUE(decoded.migrate.done);
}

// Every field a request may carry, for every op that takes it.
TEST(AdminProtocolSchemaTest, EveryRequestFieldOfEveryOpRoundTrips) {
  Request request;
  request.consumer = "m\xc3\xa9ller";
  request.from = "from-consumer";
  request.to = "to-consumer";
  request.partition = UINT32_MAX;
  request.fact_id = UINT64_MAX;
  request.force = true;
  request.dry_run = true;
  request.progress = true;
  request.fact_ids = {1, UINT64_MAX};
  request.table = "orders";
  request.key = std::string("\0k\xff", 3);
  request.key_from = std::string("\0a", 2);
  request.key_to = std::string("\xff", 1);
  request.limit = kScanLimitMax;
  request.target = "/backups/b\xc3\xa4";
  request.keep = UINT32_MAX;
  request.rate_limit_bytes_per_s = UINT64_MAX;
  request.batch_rows = kScanLimitMax;
  request.rows_per_second = UINT64_MAX;
  for (int op = 0; op <= static_cast<int>(kLastOp); ++op) {
    SCOPED_TRACE(OpName(static_cast<Op>(op)));
    request.op = static_cast<Op>(op);
    std::string line = EncodeRequest(request);
    line.pop_back();
    Request parsed;
    ASSERT_OK(ParseRequest(line, &parsed));
    EXPECT_EQ(parsed.op, request.op);
    std::string again = EncodeRequest(parsed);
    again.pop_back();
    EXPECT_EQ(again, line);
  }
  // A request of an op carries the fields it takes, set: a sample of them made it.
  request.op = Op::kStateScan;
  std::string line = EncodeRequest(request);
  line.pop_back();
  Request parsed;
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.key_from, request.key_from);
  EXPECT_EQ(parsed.key_to, request.key_to);
  EXPECT_EQ(parsed.limit, kScanLimitMax);
  request.op = Op::kMigrate;
  line = EncodeRequest(request);
  line.pop_back();
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.table, request.table);
  EXPECT_EQ(parsed.key_from, request.key_from);
  EXPECT_EQ(parsed.batch_rows, kScanLimitMax);
  EXPECT_EQ(parsed.rows_per_second, UINT64_MAX);
  EXPECT_TRUE(parsed.dry_run);
  EXPECT_TRUE(parsed.progress);
}

// A reply of another version (an engine of another release) is refused naming both versions and
// what to do, not taken for a malformed one.
TEST(AdminProtocolSchemaTest, AReplyOfAnotherVersionIsRefusedNamingBoth) {
  ASSERT_EQ(kProtocolVersion, 2u);
  for (const char* line : {R"({"v":1,"ok":true,"result":{"version":1,"path":"/db"}})",
                           R"({"v":1,"progress":{"done":1,"total":2}})"}) {
    bool progress = false;
    uint64_t done = 0, total = 0;
    Reply reply;
    Status s = DecodeReply(Op::kHello, line, &progress, &done, &total, &reply);
    EXPECT_EQ(s.code(), Status::Code::kNotSupported) << line << ": " << s.ToString();
    EXPECT_NE(s.message().find("the engine's admin socket speaks protocol v1, this wharf speaks "
                               "v2: use the wharf program"),
              std::string::npos)
        << s.message();
    EXPECT_FALSE(progress);
  }
  Request request;
  Status s = ParseRequest(R"({"v":1,"op":"stat"})", &request);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("this request speaks protocol v1, this engine speaks v2"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace wharf::internal::admin_socket
