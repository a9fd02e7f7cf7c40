// The admin socket's protocol (engine/admin/socket/protocol.h): requests and replies of every op
// round-trip exactly (bytes of any value included), errors keep their code, subcode, retryability
// and message, and malformed replies are refused by name. (Malformed requests: admin_socket_test
// sends them over a real socket; fuzz_admin_request throws everything else at the parser.)
#include <gtest/gtest.h>

#include "engine/admin/socket/protocol.h"
#include "test_util.h"

namespace wharf::internal::admin_socket {
namespace {

Reply RoundTrip(Op op, const Reply& reply) {
  std::string line = EncodeReply(op, reply);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line, whatever the bytes
  line.pop_back();
  bool progress = true;
  uint32_t done = 0, total = 0;
  Reply decoded;
  EXPECT_OK(DecodeReply(op, line, &progress, &done, &total, &decoded));
  EXPECT_FALSE(progress);
  return decoded;
}

TEST(AdminProtocolTest, RequestsRoundTrip) {
  Request request;
  request.op = Op::kDeadRetry;
  request.consumer = "m\xc3\xa9ller \"quoted\"\n";
  request.fact_ids = {1, UINT64_MAX};
  std::string line = EncodeRequest(request);
  line.pop_back();
  Request parsed;
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.op, Op::kDeadRetry);
  EXPECT_EQ(parsed.consumer, request.consumer);
  EXPECT_EQ(parsed.fact_ids, request.fact_ids);

  request = Request();
  request.op = Op::kCursorGet;
  request.consumer = "c";
  request.partition = UINT32_MAX;
  line = EncodeRequest(request);
  line.pop_back();
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.partition, UINT32_MAX);

  // Optional fields may be left out; every op name maps back.
  ASSERT_OK(ParseRequest(R"({"op":"trim","v":1})", &parsed));
  EXPECT_EQ(parsed.op, Op::kTrim);
  EXPECT_FALSE(parsed.dry_run);
  for (int op = 0; op <= static_cast<int>(Op::kStat); ++op) {
    Op back;
    ASSERT_TRUE(OpFromName(OpName(static_cast<Op>(op)), &back));
    EXPECT_EQ(static_cast<int>(back), op);
  }
}

TEST(AdminProtocolTest, ErrorsKeepCodeSubcodeAndMessage) {
  Reply reply;
  reply.status = Status::InvalidArgument("consumer 'x' already has 2 cursors")
                     .WithSubCode(Status::SubCode::kAlreadyExists);
  Reply decoded = RoundTrip(Op::kCursorCopy, reply);
  EXPECT_TRUE(decoded.status.IsInvalidArgument());
  EXPECT_EQ(decoded.status.subcode(), Status::SubCode::kAlreadyExists);
  EXPECT_EQ(decoded.status.message(), "consumer 'x' already has 2 cursors");

  reply.status = Status::IOError("disk full", /*retryable=*/true);
  decoded = RoundTrip(Op::kCursorDelete, reply);
  EXPECT_TRUE(decoded.status.IsIOError());
  EXPECT_TRUE(decoded.status.retryable());

  // An error with partial results keeps them (retried before a conflict).
  reply.status = Status::Conflict("dead letter 9 of m changed");
  reply.retried = {{3, 10}};
  decoded = RoundTrip(Op::kDeadRetry, reply);
  EXPECT_TRUE(decoded.status.IsConflict());
  ASSERT_EQ(decoded.retried.size(), 1u);
  EXPECT_EQ(decoded.retried[0].new_fact_id, 10u);

  // An error before any op (a malformed request) decodes for every op.
  std::string line = EncodeError(Status::Busy("64 connections are open"));
  line.pop_back();
  bool progress = false;
  uint32_t done = 0, total = 0;
  ASSERT_OK(DecodeReply(Op::kStat, line, &progress, &done, &total, &decoded));
  EXPECT_TRUE(decoded.status.IsBusy());
}

TEST(AdminProtocolTest, ResultsRoundTripWithAnyBytes) {
  Reply reply;
  DeadLetter& letter = reply.dead_letters.emplace_back();
  letter.consumer = "mailer";
  letter.reason = std::string("bad\0\xff\n", 6);
  letter.fact.id = 7;
  letter.fact.partition = 3;
  letter.fact.type = "OrderCreated";
  letter.fact.key = std::string("\0k", 2);
  letter.fact.payload = "\xff\xfe{\"json\":1}";
  letter.fact.headers = {{"h", std::string("\0", 1)}, {"wharf-retry-of", "3"}};
  letter.fact.source = "projector";
  letter.fact.v = 2;
  letter.fact.depth = 1;
  letter.fact.commit_ms = -5;
  letter.fact.deliver_at_ms = 1700000000000;
  letter.fact.scheduled_id = 4;
  Reply decoded = RoundTrip(Op::kDeadList, reply);
  ASSERT_EQ(decoded.dead_letters.size(), 1u);
  const DeadLetter& got = decoded.dead_letters[0];
  EXPECT_EQ(got.reason, letter.reason);
  EXPECT_EQ(got.fact.key, letter.fact.key);
  EXPECT_EQ(got.fact.payload, letter.fact.payload);
  EXPECT_EQ(got.fact.headers, letter.fact.headers);
  EXPECT_EQ(got.fact.commit_ms, -5);
  EXPECT_EQ(got.fact.scheduled_id, 4u);

  reply = Reply();
  reply.trim.consumer_count = 2;
  reply.trim.fact_count = 5;
  reply.trim.partitions = {{0, 9, 5, 100}, {1, 0, 0, 0}};
  decoded = RoundTrip(Op::kTrim, reply);
  EXPECT_EQ(decoded.trim.fact_count, 5u);
  ASSERT_EQ(decoded.trim.partitions.size(), 2u);
  EXPECT_EQ(decoded.trim.partitions[0].trim_point, 9u);

  reply = Reply();
  reply.moves = {{0, true, 5, 2}, {1, false, 0, 0}};
  decoded = RoundTrip(Op::kCursorSet, reply);
  ASSERT_EQ(decoded.moves.size(), 2u);
  EXPECT_TRUE(decoded.moves[0].existed);
  EXPECT_EQ(decoded.moves[0].from_fact_id, 5u);
  EXPECT_FALSE(decoded.moves[1].existed);
}

TEST(AdminProtocolTest, MalformedRepliesAreRefused) {
  bool progress = false;
  uint32_t done = 0, total = 0;
  Reply reply;
  for (const char* line :
       {"", "nope", "[]", R"({"v":2,"ok":true})", R"({"v":1})",
        R"({"v":1,"ok":false,"code":"Weird","subcode":"None","retryable":false,"message":""})",
        R"({"v":1,"ok":true})", R"({"v":1,"ok":true,"result":{"cursors":7}})",
        R"({"v":1,"progress":{"done":-1,"total":2}})"}) {
    Status s = DecodeReply(Op::kCursorList, line, &progress, &done, &total, &reply);
    EXPECT_EQ(s.code(), Status::Code::kInternal) << line << ": " << s.ToString();
    EXPECT_NE(s.message().find("malformed reply"), std::string::npos) << s.message();
  }
  ASSERT_OK(DecodeReply(Op::kTrim, R"({"v":1,"progress":{"done":1,"total":4}})", &progress, &done,
                        &total, &reply));
  EXPECT_TRUE(progress);
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(total, 4u);
}

}  // namespace
}  // namespace wharf::internal::admin_socket
