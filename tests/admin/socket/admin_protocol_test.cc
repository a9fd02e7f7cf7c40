// The admin socket's protocol (engine/admin/socket/protocol.h): requests and replies of every op
// round-trip exactly (bytes of any value included), errors keep their code, subcode, retryability
// and message, and malformed replies are refused by name. (Malformed requests: admin_socket_test
// sends them over a real socket; fuzz_admin_request throws everything else at the parser.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/admin/socket/protocol.h"
#include "test_util.h"
#include "wharf/engine.h"

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
  ASSERT_OK(ParseRequest(R"({"op":"trim","v":2})", &parsed));
  EXPECT_EQ(parsed.op, Op::kTrim);
  EXPECT_FALSE(parsed.dry_run);
  for (int op = 0; op <= static_cast<int>(kLastOp); ++op) {
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

// A histogram whose values are not exact in decimal, bounds down to the smallest subnormal.
Histogram SampleHistogram(double scale) {
  Histogram histogram;
  histogram.upper_bounds = {5e-324, 0.1 * scale, 1.0 / 3 * scale, 1e300};
  histogram.cumulative_counts = {1, 2, 3, UINT64_MAX};
  histogram.count = UINT64_MAX;
  histogram.sum = 0.1 + 0.2 * scale;
  return histogram;
}

void ExpectSameHistogram(const Histogram& a, const Histogram& b) {
  EXPECT_EQ(a.upper_bounds, b.upper_bounds);  // bit for bit: == on doubles
  EXPECT_EQ(a.cumulative_counts, b.cumulative_counts);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.sum, b.sum);
}

// Every field of a metrics snapshot, each with its own value, comes back exactly.
TEST(AdminProtocolTest, MetricsRoundTripEveryField) {
  Reply reply;
  MetricsSnapshot& m = reply.metrics;
  m.live = false;
  m.taken_ms = -1700000000123;
  m.io_backend = "uring";
  m.partitions = UINT32_MAX;
  CommitMetrics& c = m.commits;
  c.transactions_total = 1;
  c.facts_total = 2;
  c.bytes_total = 3;
  c.refused_total = 4;
  c.read_conflicts_total = 3;
  c.conflict_window_bytes = uint64_t{1} << 40;
  c.failed_total = 5;
  c.busy_total = 6;
  c.sync_rounds_total = 7;
  c.commit_seconds = SampleHistogram(1);
  c.sync_seconds = SampleHistogram(7);
  c.sync_facts = SampleHistogram(1e6);
  c.queue_depth = 8;
  c.producers_waiting = 9;
  c.durable_lsn = 10;
  c.last_lsn = UINT64_MAX;
  c.wal_spare_ready = true;
  c.wal_spares_used_total = 11;
  for (int i = 0; i < 2; ++i) {
    ConsumerMetrics& consumer = m.consumers.emplace_back();
    consumer.consumer = i == 0 ? "m\xc3\xa9ller \"q\"\n" : "totals";
    consumer.kind = "projection";
    consumer.instance = std::string("inst\0\xff", 6);
    consumer.delivered_total = 12 + i;
    consumer.handled_total = 13;
    consumer.rejected_total = 14;
    consumer.failed_total = 15;
    consumer.retry_total = 16;
    consumer.retries_total = 17;
    consumer.dead_letters_total = 18;
    consumer.lag_facts = 19;
    consumer.lag_seconds = 0.30000000000000004;
    consumer.lag_known = false;  // not the default: the round trip must carry it
    consumer.retrying = true;
    consumer.retrying_fact_id = 20;
    consumer.retrying_attempt = UINT32_MAX;
    consumer.retrying_since_ms = 21;
    consumer.last_error = std::string("timeout\0\n\xfe", 10);
    consumer.last_error_ms = 22;
    consumer.lease_held = true;
    consumer.lease_epoch = 23;
    consumer.partitions = {{0, 24, 25, true}, {UINT32_MAX, UINT64_MAX, 26, false}};
  }
  RetentionMetrics& r = m.retention;
  r.passes_total = 27;
  r.failed_passes_total = 28;
  r.facts_removed_total = 29;
  r.bytes_removed_total = 30;
  r.dropped = {{"mailer", 31}, {"totals", 32}};
  StoreMetrics& st = m.store;
  st.live_sst_bytes = 33;
  st.memtable_bytes = 34;
  st.directory_bytes = 35;
  st.flushes_running = 36;
  st.compactions_running = 37;
  st.compactions_pending = 38;
  st.pending_compaction_bytes = 39;
  st.writes_stopped = true;
  st.write_stalls_total = 40;
  st.write_stall_seconds_total = 1e-7;
  st.flush_bytes_total = 41;
  st.compaction_bytes_total = 42;
  st.block_cache_hits_total = 43;
  st.block_cache_misses_total = 44;

  BackupMetrics& b = m.backups;
  b.backups_total = 45;
  b.failed_total = 46;
  b.last_ms = 1700000000047;
  b.last_ok = true;
  b.last_duration_seconds = 0.1 + 0.2;
  b.last_copied_bytes = UINT64_MAX;
  b.last_size_bytes = 48;
  b.last_fact_id = 49;
  const MetricsSnapshot got = RoundTrip(Op::kMetrics, reply).metrics;
  EXPECT_EQ(got.live, m.live);
  EXPECT_EQ(got.taken_ms, m.taken_ms);
  EXPECT_EQ(got.io_backend, m.io_backend);
  EXPECT_EQ(got.partitions, m.partitions);
  const CommitMetrics& gc = got.commits;
  EXPECT_EQ(gc.transactions_total, 1u);
  EXPECT_EQ(gc.facts_total, 2u);
  EXPECT_EQ(gc.bytes_total, 3u);
  EXPECT_EQ(gc.refused_total, 4u);
  EXPECT_EQ(gc.read_conflicts_total, 3u);
  EXPECT_EQ(gc.conflict_window_bytes, uint64_t{1} << 40);
  EXPECT_EQ(gc.failed_total, 5u);
  EXPECT_EQ(gc.busy_total, 6u);
  EXPECT_EQ(gc.sync_rounds_total, 7u);
  ExpectSameHistogram(gc.commit_seconds, c.commit_seconds);
  ExpectSameHistogram(gc.sync_seconds, c.sync_seconds);
  ExpectSameHistogram(gc.sync_facts, c.sync_facts);
  EXPECT_EQ(gc.queue_depth, 8u);
  EXPECT_EQ(gc.producers_waiting, 9u);
  EXPECT_EQ(gc.durable_lsn, 10u);
  EXPECT_EQ(gc.last_lsn, UINT64_MAX);
  EXPECT_TRUE(gc.wal_spare_ready);
  EXPECT_EQ(gc.wal_spares_used_total, 11u);
  ASSERT_EQ(got.consumers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ConsumerMetrics& want = m.consumers[i];
    const ConsumerMetrics& have = got.consumers[i];
    EXPECT_EQ(have.consumer, want.consumer);
    EXPECT_EQ(have.kind, want.kind);
    EXPECT_EQ(have.instance, want.instance);
    EXPECT_EQ(have.delivered_total, want.delivered_total);
    EXPECT_EQ(have.handled_total, 13u);
    EXPECT_EQ(have.rejected_total, 14u);
    EXPECT_EQ(have.failed_total, 15u);
    EXPECT_EQ(have.retry_total, 16u);
    EXPECT_EQ(have.retries_total, 17u);
    EXPECT_EQ(have.dead_letters_total, 18u);
    EXPECT_EQ(have.lag_facts, 19u);
    EXPECT_EQ(have.lag_seconds, 0.30000000000000004);
    EXPECT_FALSE(have.lag_known);
    EXPECT_TRUE(have.retrying);
    EXPECT_EQ(have.retrying_fact_id, 20u);
    EXPECT_EQ(have.retrying_attempt, UINT32_MAX);
    EXPECT_EQ(have.retrying_since_ms, 21);
    EXPECT_EQ(have.last_error, want.last_error);
    EXPECT_EQ(have.last_error_ms, 22);
    EXPECT_TRUE(have.lease_held);
    EXPECT_EQ(have.lease_epoch, 23u);
    ASSERT_EQ(have.partitions.size(), 2u);
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(have.partitions[p].partition, want.partitions[p].partition);
      EXPECT_EQ(have.partitions[p].cursor, want.partitions[p].cursor);
      EXPECT_EQ(have.partitions[p].lag_facts, want.partitions[p].lag_facts);
      EXPECT_EQ(have.partitions[p].lag_known, want.partitions[p].lag_known);
    }
  }
  EXPECT_EQ(got.retention.passes_total, 27u);
  EXPECT_EQ(got.retention.failed_passes_total, 28u);
  EXPECT_EQ(got.retention.facts_removed_total, 29u);
  EXPECT_EQ(got.retention.bytes_removed_total, 30u);
  ASSERT_EQ(got.retention.dropped.size(), 2u);
  EXPECT_EQ(got.retention.dropped[1].consumer, "totals");
  EXPECT_EQ(got.retention.dropped[1].facts_total, 32u);
  const StoreMetrics& gs = got.store;
  EXPECT_EQ(gs.live_sst_bytes, 33u);
  EXPECT_EQ(gs.memtable_bytes, 34u);
  EXPECT_EQ(gs.directory_bytes, 35u);
  EXPECT_EQ(gs.flushes_running, 36u);
  EXPECT_EQ(gs.compactions_running, 37u);
  EXPECT_EQ(gs.compactions_pending, 38u);
  EXPECT_EQ(gs.pending_compaction_bytes, 39u);
  EXPECT_TRUE(gs.writes_stopped);
  EXPECT_EQ(gs.write_stalls_total, 40u);
  EXPECT_EQ(gs.write_stall_seconds_total, 1e-7);
  EXPECT_EQ(gs.flush_bytes_total, 41u);
  EXPECT_EQ(gs.compaction_bytes_total, 42u);
  EXPECT_EQ(gs.block_cache_hits_total, 43u);
  EXPECT_EQ(gs.block_cache_misses_total, 44u);
  const BackupMetrics& gb = got.backups;
  EXPECT_EQ(gb.backups_total, 45u);
  EXPECT_EQ(gb.failed_total, 46u);
  EXPECT_EQ(gb.last_ms, 1700000000047);
  EXPECT_TRUE(gb.last_ok);
  EXPECT_EQ(gb.last_duration_seconds, 0.1 + 0.2);
  EXPECT_EQ(gb.last_copied_bytes, UINT64_MAX);
  EXPECT_EQ(gb.last_size_bytes, 48u);
  EXPECT_EQ(gb.last_fact_id, 49u);

  // A value that is not finite (JSON has none) travels as null and reads back as NaN; the
  // defaults (an empty snapshot) round-trip too.
  reply = Reply();
  reply.metrics.commits.commit_seconds.sum = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(RoundTrip(Op::kMetrics, reply).metrics.commits.commit_seconds.sum));
  reply = Reply();
  const MetricsSnapshot empty = RoundTrip(Op::kMetrics, reply).metrics;
  EXPECT_TRUE(empty.live);
  EXPECT_TRUE(empty.consumers.empty());
  EXPECT_TRUE(empty.commits.sync_seconds.upper_bounds.empty());

  // A reply missing a part, or with a bound that is not a number, is refused by name.
  bool progress = false;
  uint32_t done = 0, total = 0;
  std::string line = EncodeReply(Op::kMetrics, Reply());
  line.pop_back();
  std::string broken = line;
  broken.replace(broken.find("\"store\""), 7, "\"stor\"");
  Status s = DecodeReply(Op::kMetrics, broken, &progress, &done, &total, &reply);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("'store'"), std::string::npos) << s.message();
  reply = Reply();
  reply.metrics.commits.sync_seconds.upper_bounds = {0.5};
  line = EncodeReply(Op::kMetrics, reply);
  line.pop_back();
  line.replace(line.find("[0.5]"), 5, "[\"x\"]");
  s = DecodeReply(Op::kMetrics, line, &progress, &done, &total, &reply);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("sync_seconds field 'upper_bounds[]' is not a number"),
            std::string::npos)
      << s.message();
}

BackupInfo SampleBackupInfo() {
  BackupInfo info;
  info.id = UINT32_MAX;
  info.created_ms = -1;
  info.duration_ms = 1234;
  info.last_fact_id = UINT64_MAX;
  info.durable_lsn = UINT64_MAX - 1;
  info.size_bytes = uint64_t{1} << 40;
  info.copied_bytes = 7;
  info.files = 9;
  info.format_version = 3;
  info.partitions = 16;
  info.incarnation = 0x8000000000000001;
  return info;
}

void ExpectSameInfo(const BackupInfo& got, const BackupInfo& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.created_ms, want.created_ms);
  EXPECT_EQ(got.duration_ms, want.duration_ms);
  EXPECT_EQ(got.last_fact_id, want.last_fact_id);
  EXPECT_EQ(got.durable_lsn, want.durable_lsn);
  EXPECT_EQ(got.size_bytes, want.size_bytes);
  EXPECT_EQ(got.copied_bytes, want.copied_bytes);
  EXPECT_EQ(got.files, want.files);
  EXPECT_EQ(got.format_version, want.format_version);
  EXPECT_EQ(got.partitions, want.partitions);
  EXPECT_EQ(got.incarnation, want.incarnation);
}

// A backup request carries its target, keep and rate limit; the target must be absolute (the
// engine's working directory is not the client's); the reply carries every BackupInfo field, an
// error (Busy: another backup runs) its code; progress counts bytes, beyond 32 bits.
TEST(AdminProtocolTest, BackupRoundTrips) {
  Request request;
  request.op = Op::kBackup;
  request.target =
      "/mnt/b\xc3\xa4"
      "ckups \"q\"";
  request.keep = UINT32_MAX;
  request.rate_limit_bytes_per_s = UINT64_MAX;
  request.progress = true;
  std::string line = EncodeRequest(request);
  line.pop_back();
  Request parsed;
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.op, Op::kBackup);
  EXPECT_EQ(parsed.target, request.target);
  EXPECT_EQ(parsed.keep, UINT32_MAX);
  EXPECT_EQ(parsed.rate_limit_bytes_per_s, UINT64_MAX);
  EXPECT_TRUE(parsed.progress);
  ASSERT_OK(ParseRequest(R"({"v":2,"op":"backup","target":"/b"})", &parsed));
  EXPECT_EQ(parsed.keep, 0u);
  EXPECT_EQ(parsed.rate_limit_bytes_per_s, 0u);
  EXPECT_FALSE(parsed.progress);

  const std::pair<const char*, const char*> refused[] = {
      {R"({"v":2,"op":"backup"})", "needs field 'target'"},
      {R"({"v":2,"op":"backup","target":"backups"})", "must be an absolute path"},
      {R"({"v":2,"op":"backup","target":""})", "must be an absolute path"},
      {R"({"v":2,"op":"backup","target":"/b","keep":4294967296})", "'keep'"},
      {R"({"v":2,"op":"backup","target":"/b","rate_limit_bytes_per_s":-1})",
       "'rate_limit_bytes_per_s'"},
  };
  for (const auto& [text, problem] : refused) {
    Status s = ParseRequest(text, &parsed);
    EXPECT_TRUE(s.IsInvalidArgument()) << text << ": " << s.ToString();
    EXPECT_NE(s.message().find(problem), std::string::npos) << text << ": " << s.message();
  }

  Reply reply;
  reply.backup = SampleBackupInfo();
  ExpectSameInfo(RoundTrip(Op::kBackup, reply).backup, reply.backup);
  reply = Reply();
  reply.status = Status::Busy("a backup is already running");
  EXPECT_TRUE(RoundTrip(Op::kBackup, reply).status.IsBusy());

  line = EncodeProgress(uint64_t{5} << 32, uint64_t{6} << 32);
  line.pop_back();
  bool progress = false;
  uint64_t done = 0, total = 0;
  ASSERT_OK(DecodeReply(Op::kBackup, line, &progress, &done, &total, &reply));
  EXPECT_TRUE(progress);
  EXPECT_EQ(done, uint64_t{5} << 32);
  EXPECT_EQ(total, uint64_t{6} << 32);
  // Counts of partitions (trim) never pass 32 bits: such a line is malformed there.
  uint32_t done_32 = 0, total_32 = 0;
  Status s = DecodeReply(Op::kTrim, line, &progress, &done_32, &total_32, &reply);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_FALSE(progress);
}

// A migrate request carries its table, where to start (bytes of any value), batch size, rate,
// dry run and progress; batch_rows is 1..kScanLimitMax (absent: MigrateOptions' default); a
// missing table or a field of another op is refused by name. The reply carries the whole
// MigrateReport, also with an error (the batches committed before it); progress counts rows.
TEST(AdminProtocolTest, MigrateRoundTrips) {
  Request request;
  request.op = Op::kMigrate;
  request.table = "orders";
  request.key_from = std::string("k\0\xff", 3);
  request.batch_rows = kScanLimitMax;
  request.rows_per_second = UINT64_MAX;
  request.dry_run = true;
  request.progress = true;
  std::string line = EncodeRequest(request);
  line.pop_back();
  Request parsed;
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.op, Op::kMigrate);
  EXPECT_EQ(parsed.table, "orders");
  EXPECT_EQ(parsed.key_from, request.key_from);
  EXPECT_EQ(parsed.batch_rows, kScanLimitMax);
  EXPECT_EQ(parsed.rows_per_second, UINT64_MAX);
  EXPECT_TRUE(parsed.dry_run);
  EXPECT_TRUE(parsed.progress);
  ASSERT_OK(ParseRequest(R"({"v":2,"op":"migrate","table":"t"})", &parsed));
  EXPECT_EQ(parsed.batch_rows, MigrateOptions().batch_rows);
  EXPECT_EQ(parsed.rows_per_second, 0u);
  EXPECT_TRUE(parsed.key_from.empty());
  EXPECT_FALSE(parsed.dry_run);
  EXPECT_FALSE(parsed.progress);
  ASSERT_OK(ParseRequest(R"({"v":2,"op":"migrate","table":"t","batch_rows":1})", &parsed));
  EXPECT_EQ(parsed.batch_rows, 1u);

  const std::pair<const char*, const char*> refused[] = {
      {R"({"v":2,"op":"migrate"})", "op 'migrate' needs field 'table'"},
      {R"({"v":2,"op":"migrate","table":"t","batch_rows":0})",
       "field 'batch_rows' of op 'migrate' must be a whole number in [1, 100000], not 0"},
      {R"({"v":2,"op":"migrate","table":"t","batch_rows":100001})",
       "field 'batch_rows' of op 'migrate' must be a whole number in [1, 100000], not 100001"},
      {R"({"v":2,"op":"migrate","table":"t","batch_rows":-1})", "'batch_rows' of op 'migrate'"},
      {R"({"v":2,"op":"migrate","table":"t","rows_per_second":"fast"})",
       "'rows_per_second' of op 'migrate' must be a whole number"},
      {R"({"v":2,"op":"migrate","table":"t","from_hex":"zz"})", "'from_hex' of op 'migrate'"},
      {R"({"v":2,"op":"migrate","table":7})", "'table' of op 'migrate' must be a string"},
      {R"({"v":2,"op":"migrate","table":"t","limit":5})", "op 'migrate' takes no field 'limit'"},
  };
  for (const auto& [text, problem] : refused) {
    Status s = ParseRequest(text, &parsed);
    EXPECT_TRUE(s.IsInvalidArgument()) << text << ": " << s.ToString();
    EXPECT_NE(s.message().find(problem), std::string::npos) << text << ": " << s.message();
  }

  Reply reply;
  reply.migrate.version = UINT32_MAX;
  reply.migrate.rows = UINT64_MAX;
  reply.migrate.migrated = UINT64_MAX - 1;
  reply.migrate.batches = 7;
  reply.migrate.done = false;
  reply.migrate.resume_from = std::string("k\n\0", 3);
  Reply decoded = RoundTrip(Op::kMigrate, reply);
  EXPECT_EQ(decoded.migrate.version, UINT32_MAX);
  EXPECT_EQ(decoded.migrate.rows, UINT64_MAX);
  EXPECT_EQ(decoded.migrate.migrated, UINT64_MAX - 1);
  EXPECT_EQ(decoded.migrate.batches, 7u);
  EXPECT_FALSE(decoded.migrate.done);
  EXPECT_EQ(decoded.migrate.resume_from, reply.migrate.resume_from);
  // A failure keeps the counts of the batches committed before it.
  reply.status = Status::NotSupported("table 'orders', key 'k': no migration is registered");
  decoded = RoundTrip(Op::kMigrate, reply);
  EXPECT_EQ(decoded.status.code(), Status::Code::kNotSupported);
  EXPECT_EQ(decoded.status.message(), reply.status.message());
  EXPECT_EQ(decoded.migrate.batches, 7u);
  EXPECT_EQ(decoded.migrate.resume_from, reply.migrate.resume_from);
  reply = Reply();
  reply.migrate.done = true;
  decoded = RoundTrip(Op::kMigrate, reply);
  EXPECT_TRUE(decoded.migrate.done);
  EXPECT_EQ(decoded.migrate.version, 1u);

  line = EncodeProgress(uint64_t{5} << 32, 0);
  line.pop_back();
  bool progress = false;
  uint64_t done = 0, total = 1;
  ASSERT_OK(DecodeReply(Op::kMigrate, line, &progress, &done, &total, &reply));
  EXPECT_TRUE(progress);
  EXPECT_EQ(done, uint64_t{5} << 32);
  EXPECT_EQ(total, 0u);
}

// stat carries the incarnation and the last backup (ok with its fields, or failed with its error
// of any bytes).
TEST(AdminProtocolTest, StatCarriesIncarnationAndLastBackup) {
  Reply reply;
  reply.stat.incarnation = UINT64_MAX;
  LastBackup& last = reply.stat.last_backup;
  last.exists = true;
  last.ok = true;
  last.finished_ms = 1700000000000;
  last.duration_ms = 5;
  last.target = "/mnt/backups";
  last.info = SampleBackupInfo();
  Reply decoded = RoundTrip(Op::kStat, reply);
  EXPECT_EQ(decoded.stat.incarnation, UINT64_MAX);
  const LastBackup& got = decoded.stat.last_backup;
  EXPECT_TRUE(got.exists);
  EXPECT_TRUE(got.ok);
  EXPECT_EQ(got.finished_ms, 1700000000000);
  EXPECT_EQ(got.duration_ms, 5);
  EXPECT_EQ(got.target, "/mnt/backups");
  ExpectSameInfo(got.info, last.info);

  last = LastBackup();
  last.exists = true;
  last.error = std::string("disk full\0\xff", 11);
  decoded = RoundTrip(Op::kStat, reply);
  EXPECT_TRUE(decoded.stat.last_backup.exists);
  EXPECT_FALSE(decoded.stat.last_backup.ok);
  EXPECT_EQ(decoded.stat.last_backup.error, last.error);
  EXPECT_FALSE(RoundTrip(Op::kStat, Reply()).stat.last_backup.exists);
}

// state_get and state_scan carry keys, bounds and rows of any bytes exactly; a read conflict keeps
// its subcode by name (as every subcode does).
TEST(AdminProtocolTest, StateReadsRoundTripAnyBytes) {
  Request request;
  request.op = Op::kStateScan;
  request.table = "orders";
  request.key_from = std::string("a\0\xff", 3);
  request.key_to = std::string("\xff\xff\n", 3);
  request.limit = kScanLimitMax;
  std::string line = EncodeRequest(request);
  line.pop_back();
  Request parsed;
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.op, Op::kStateScan);
  EXPECT_EQ(parsed.table, "orders");
  EXPECT_EQ(parsed.key_from, request.key_from);
  EXPECT_EQ(parsed.key_to, request.key_to);
  EXPECT_EQ(parsed.limit, kScanLimitMax);
  // The bounds may be left out (open ends); the limit may not, nor pass the engine's bound.
  ASSERT_OK(ParseRequest(R"({"v":2,"op":"state_scan","table":"t","limit":1})", &parsed));
  EXPECT_TRUE(parsed.key_from.empty());
  EXPECT_TRUE(parsed.key_to.empty());
  Status s = ParseRequest(R"({"v":2,"op":"state_scan","table":"t"})", &parsed);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("needs field 'limit'"), std::string::npos) << s.message();
  s = ParseRequest(R"({"v":2,"op":"state_scan","table":"t","limit":100001})", &parsed);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("'limit' of op 'state_scan' must be a whole number in [0, 100000]"),
            std::string::npos)
      << s.message();
  s = ParseRequest(R"({"v":2,"op":"state_get","table":"t","key_hex":"6g"})", &parsed);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("'key_hex' of op 'state_get' must be a string of hex digits"),
            std::string::npos)
      << s.message();

  request = Request();
  request.op = Op::kStateGet;
  request.table = "t";
  request.key = std::string("\0\x80k", 3);
  line = EncodeRequest(request);
  line.pop_back();
  ASSERT_OK(ParseRequest(line, &parsed));
  EXPECT_EQ(parsed.key, request.key);

  Reply reply;
  reply.value = std::string("v\0\xfe", 3);
  EXPECT_EQ(RoundTrip(Op::kStateGet, reply).value, reply.value);
  reply = Reply();
  reply.rows = {{std::string("\0", 1), ""}, {"k\n", std::string(3, '\xff')}};
  reply.more = true;
  reply.resume_from = std::string("k\n\0", 3);
  Reply decoded = RoundTrip(Op::kStateScan, reply);
  EXPECT_EQ(decoded.rows, reply.rows);
  EXPECT_TRUE(decoded.more);
  EXPECT_EQ(decoded.resume_from, reply.resume_from);
  decoded = RoundTrip(Op::kStateScan, Reply());
  EXPECT_TRUE(decoded.rows.empty());
  EXPECT_FALSE(decoded.more);

  // Every subcode travels by its name, and reads back as itself.
  reply = Reply();
  reply.status = Status::Conflict("orders/o-1 was written since the snapshot")
                     .WithSubCode(Status::SubCode::kReadConflict);
  line = EncodeReply(Op::kStateScan, reply);
  EXPECT_NE(line.find("\"subcode\":\"ReadConflict\""), std::string::npos) << line;
  decoded = RoundTrip(Op::kStateScan, reply);
  EXPECT_TRUE(decoded.status.IsConflict());
  EXPECT_EQ(decoded.status.subcode(), Status::SubCode::kReadConflict);
  EXPECT_EQ(decoded.status.message(), "orders/o-1 was written since the snapshot");
  reply.status = Status::IOError("no answer", true).WithSubCode(Status::SubCode::kTimedOut);
  EXPECT_EQ(RoundTrip(Op::kStat, reply).status.subcode(), Status::SubCode::kTimedOut);
}

TEST(AdminProtocolTest, MalformedRepliesAreRefused) {
  bool progress = false;
  uint32_t done = 0, total = 0;
  Reply reply;
  for (const char* line :
       {"", "nope", "[]", R"({"ok":true})", R"({"v":2})",
        R"({"v":2,"ok":false,"code":"Weird","subcode":"None","retryable":false,"message":""})",
        R"({"v":2,"ok":true})", R"({"v":2,"ok":true,"result":{"cursors":7}})",
        R"({"v":2,"progress":{"done":-1,"total":2}})"}) {
    Status s = DecodeReply(Op::kCursorList, line, &progress, &done, &total, &reply);
    EXPECT_EQ(s.code(), Status::Code::kInternal) << line << ": " << s.ToString();
    EXPECT_NE(s.message().find("malformed reply"), std::string::npos) << s.message();
  }
  ASSERT_OK(DecodeReply(Op::kTrim, R"({"v":2,"progress":{"done":1,"total":4}})", &progress, &done,
                        &total, &reply));
  EXPECT_TRUE(progress);
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(total, 4u);
}

}  // namespace
}  // namespace wharf::internal::admin_socket
