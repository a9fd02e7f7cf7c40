// The admin socket's metrics reply carries replication's metrics (wharf/metrics.h,
// ReplicationMetrics) both ways, every field exactly; a reply without them, or with a mistyped
// field, is refused by name.
#include <gtest/gtest.h>

#include "engine/admin/socket/protocol.h"
#include "test_util.h"
#include "wharf/metrics.h"

namespace wharf::internal::admin_socket {
namespace {

std::string Encoded(const Reply& reply) {
  std::string line = EncodeReply(Op::kMetrics, reply);
  EXPECT_EQ(line.back(), '\n');
  line.pop_back();
  return line;
}

Status Decode(const std::string& line, Reply* decoded) {
  bool progress = true;
  uint32_t done = 0, total = 0;
  return DecodeReply(Op::kMetrics, line, &progress, &done, &total, decoded);
}

Reply Replicating() {
  Reply reply;
  ReplicationMetrics& r = reply.metrics.replication;
  r.enabled = true;
  r.mode = "async";
  r.stream = "orders \"eu\"";
  r.term = "0123456789abcdef0123456789abcdef";
  r.last_group = UINT64_MAX;
  r.shipped_group = 2;
  r.shipped_bytes_total = 3;
  r.lag_groups = 4;
  r.lag_facts = 5;
  r.lag_bytes = 6;
  r.lag_ms = 7;
  r.fenced = true;
  r.snapshots_total = 8;
  r.snapshot_failures_total = 9;
  r.last_snapshot_group = 10;
  r.last_snapshot_ms = 1700000000011;
  r.last_snapshot_error = "replicate: snapshot \"x\"\nfailed";
  return reply;
}

TEST(AdminProtocolReplicationTest, EveryFieldRoundTrips) {
  Reply decoded;
  ASSERT_OK(Decode(Encoded(Replicating()), &decoded));
  const ReplicationMetrics& g = decoded.metrics.replication;
  EXPECT_TRUE(g.enabled);
  EXPECT_EQ(g.mode, "async");
  EXPECT_EQ(g.stream, "orders \"eu\"");
  EXPECT_EQ(g.term, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(g.last_group, UINT64_MAX);
  EXPECT_EQ(g.shipped_group, 2u);
  EXPECT_EQ(g.shipped_bytes_total, 3u);
  EXPECT_EQ(g.lag_groups, 4u);
  EXPECT_EQ(g.lag_facts, 5u);
  EXPECT_EQ(g.lag_bytes, 6u);
  EXPECT_EQ(g.lag_ms, 7u);
  EXPECT_TRUE(g.fenced);
  EXPECT_EQ(g.snapshots_total, 8u);
  EXPECT_EQ(g.snapshot_failures_total, 9u);
  EXPECT_EQ(g.last_snapshot_group, 10u);
  EXPECT_EQ(g.last_snapshot_ms, 1700000000011);
  EXPECT_EQ(g.last_snapshot_error, "replicate: snapshot \"x\"\nfailed");
}

// Every engine that speaks this version sends "replication" (one from before replication spoke
// version 1, refused as a whole): a reply without it is malformed, naming it.
TEST(AdminProtocolReplicationTest, AReplyWithoutReplicationIsRefusedByName) {
  std::string line = Encoded(Replicating());
  const size_t at = line.find(",\"replication\":{");
  ASSERT_NE(at, std::string::npos) << line;
  const size_t end = line.find('}', at);
  ASSERT_NE(end, std::string::npos);
  line.erase(at, end + 1 - at);
  ASSERT_EQ(line.find("replication"), std::string::npos) << line;
  Reply decoded;
  Status s = Decode(line, &decoded);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("field 'replication' is not present"), std::string::npos)
      << s.ToString();
}

TEST(AdminProtocolReplicationTest, AMistypedFieldIsRefusedByName) {
  std::string line = Encoded(Replicating());
  const std::string field = "\"lag_bytes\":6";
  const size_t at = line.find(field);
  ASSERT_NE(at, std::string::npos) << line;
  line.replace(at, field.size(), "\"lag_bytes\":\"six\"");
  Reply decoded;
  Status s = Decode(line, &decoded);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lag_bytes"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace wharf::internal::admin_socket
