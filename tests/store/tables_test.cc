// Unit tests of the table modules (engine/store/tables/): each family's keys round-trip, encoded
// keys sort in numeric order, decoders refuse keys of another shape, scans stop at their bounds,
// and the point readers name what does not decode. Scans and reads run on a real RocksDB database
// in a temporary directory.
#include <rocksdb/db.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/retries.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"
#include "engine/store/tables/timers.h"
#include "test_util.h"

namespace wharf::tables {
namespace {

using wharf::testing::TempDir;

TEST(TablesTest, OutboxKeysRoundTripAndSortByPartitionThenLsn) {
  const std::vector<std::pair<uint32_t, uint64_t>> ordered = {
      {0, 0}, {0, 1}, {0, 255}, {0, 256}, {0, UINT64_MAX}, {1, 0}, {256, 7}, {UINT32_MAX, 1}};
  std::vector<std::string> keys;
  for (auto [partition, lsn] : ordered) {
    keys.push_back(outbox::Key(partition, lsn));
    EXPECT_EQ(keys.back().size(), outbox::kKeyBytes);
    uint32_t decoded_partition = 0;
    uint64_t decoded_lsn = 0;
    ASSERT_TRUE(outbox::DecodeKey(keys.back(), &decoded_partition, &decoded_lsn));
    EXPECT_EQ(decoded_partition, partition);
    EXPECT_EQ(decoded_lsn, lsn);
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

TEST(TablesTest, OutboxDecoderRefusesOtherSizes) {
  uint32_t partition = 7;
  uint64_t lsn = 9;
  std::string key = outbox::Key(1, 2);
  EXPECT_FALSE(outbox::DecodeKey(key.substr(0, 11), &partition, &lsn));
  EXPECT_FALSE(outbox::DecodeKey(key + "x", &partition, &lsn));
  EXPECT_FALSE(outbox::DecodeKey("", &partition, &lsn));
  EXPECT_EQ(partition, 7u);  // untouched on refusal
  EXPECT_EQ(lsn, 9u);
  Fact fact;
  Status s = outbox::DecodeEntry(key + "x", codec::EncodeFact(Fact{}), 1, &fact);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  s = outbox::DecodeEntry(key, "not a record", 1, &fact);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST(TablesTest, TimerKeysRoundTripAndSortByDueTimeThenLsn) {
  const std::vector<std::pair<int64_t, uint64_t>> ordered = {{0, 5},   {1, 0},   {1, 1},
                                                             {255, 0}, {256, 0}, {INT64_MAX, 0}};
  std::vector<std::string> keys;
  for (auto [due_ms, lsn] : ordered) {
    keys.push_back(timers::Key(due_ms, lsn));
    int64_t decoded_due_ms = 0;
    uint64_t decoded_lsn = 0;
    ASSERT_TRUE(timers::DecodeKey(keys.back(), &decoded_due_ms, &decoded_lsn));
    EXPECT_EQ(decoded_due_ms, due_ms);
    EXPECT_EQ(decoded_lsn, lsn);
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(timers::Key(-5, 3), timers::Key(0, 3));  // a due time in the past is due now
  int64_t due_ms = 0;
  uint64_t lsn = 0;
  EXPECT_FALSE(timers::DecodeKey(keys[0].substr(1), &due_ms, &lsn));
  EXPECT_FALSE(timers::DecodeKey(keys[0] + "x", &due_ms, &lsn));
}

TEST(TablesTest, CursorKeysRoundTripAndSortByConsumerThenPartition) {
  const std::vector<std::pair<std::string, uint32_t>> ordered = {
      {"a", 0}, {"a", 1}, {"a", 256}, {"a", UINT32_MAX}, {"a\x01", 0}, {"ab", 0}, {"b", 3}};
  std::vector<std::string> keys;
  for (const auto& [consumer, partition] : ordered) {
    keys.push_back(cursors::Key(consumer, partition));
    std::string_view decoded_consumer;
    uint32_t decoded_partition = 0;
    ASSERT_TRUE(cursors::DecodeKey(keys.back(), &decoded_consumer, &decoded_partition));
    EXPECT_EQ(decoded_consumer, consumer);
    EXPECT_EQ(decoded_partition, partition);
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  std::string_view consumer;
  uint32_t partition = 0;
  EXPECT_FALSE(cursors::DecodeKey(cursors::Key("a", 1).substr(1), &consumer, &partition));
  EXPECT_FALSE(cursors::DecodeKey(std::string_view("\0\0\0\0\1", 5), &consumer, &partition));
  EXPECT_FALSE(cursors::DecodeKey(cursors::Key("a", 1) + "x", &consumer, &partition));
  // Every key of "a" lies inside its range, none of "a\x01" or "ab".
  KeyRange range = cursors::Range("a");
  for (size_t i = 0; i < keys.size(); ++i) {
    bool inside = keys[i] >= range.lower && keys[i] < range.upper;
    EXPECT_EQ(inside, ordered[i].first == "a") << i;
  }
}

TEST(TablesTest, CursorValuesRoundTripAndRefuseDamage) {
  std::string sealed = cursors::EncodeValue(42, 7);
  uint64_t fact_id = 0, epoch = 0;
  ASSERT_OK(cursors::DecodeValue(sealed, &fact_id, &epoch));
  EXPECT_EQ(fact_id, 42u);
  EXPECT_EQ(epoch, 7u);
  sealed.back() ^= 1;
  EXPECT_TRUE(cursors::DecodeValue(sealed, &fact_id, &epoch).IsCorruption());
  EXPECT_TRUE(cursors::DecodeValue(codec::Seal("short"), &fact_id, &epoch).IsCorruption());
}

TEST(TablesTest, DeadLetterKeysAndValuesRoundTrip) {
  std::string key = dead_letters::Key("orders", 1234);
  std::string_view consumer;
  uint64_t lsn = 0;
  ASSERT_TRUE(dead_letters::DecodeKey(key, &consumer, &lsn));
  EXPECT_EQ(consumer, "orders");
  EXPECT_EQ(lsn, 1234u);
  EXPECT_LT(dead_letters::Key("orders", 255), dead_letters::Key("orders", 256));
  EXPECT_FALSE(dead_letters::DecodeKey(key.substr(0, key.size() - 1), &consumer, &lsn));
  EXPECT_FALSE(dead_letters::DecodeKey(key + "x", &consumer, &lsn));

  Fact fact;
  fact.type = "order.placed";
  fact.payload = "{}";
  DeadLetter letter;
  ASSERT_OK(dead_letters::DecodeEntry(
      key, dead_letters::EncodeValue("too many attempts", codec::EncodeFact(fact)), &letter));
  EXPECT_EQ(letter.consumer, "orders");
  EXPECT_EQ(letter.reason, "too many attempts");
  EXPECT_EQ(letter.fact.id, 1234u);
  EXPECT_EQ(letter.fact.type, "order.placed");
  EXPECT_TRUE(dead_letters::DecodeEntry(key, codec::Seal("\x05"), &letter).IsCorruption());
  EXPECT_TRUE(dead_letters::DecodeEntry(key.substr(2), codec::Seal(""), &letter).IsCorruption());
}

// Dead letters carry the attempt that settled the fact; those written before attempts were
// recorded (the reason right before the fact's record) still decode, with attempt 0.
TEST(TablesTest, DeadLetterAttemptsAndOldRecords) {
  const std::string key = dead_letters::Key("orders", 77);
  Fact fact;
  fact.type = "order.placed";
  fact.key = "k";
  fact.payload = "{\"n\":1}";
  fact.commit_ms = 1234567;
  DeadLetter letter;
  ASSERT_OK(dead_letters::DecodeEntry(
      key, dead_letters::EncodeValue("handler-failed: boom", codec::EncodeFact(fact), 7), &letter));
  EXPECT_EQ(letter.reason, "handler-failed: boom");
  EXPECT_EQ(letter.attempt, 7u);
  EXPECT_EQ(letter.fact.payload, fact.payload);
  EXPECT_EQ(letter.fact.commit_ms, fact.commit_ms);

  // The layout before: u16 reason length · reason · the fact's sealed record.
  for (const std::string& reason : {std::string("handler-failed: old"), std::string()}) {
    std::string body;
    codec::PutString16(&body, reason);
    body.append(codec::EncodeFact(fact));
    letter = DeadLetter();
    letter.attempt = 99;
    ASSERT_OK(dead_letters::DecodeEntry(key, codec::Seal(body), &letter));
    EXPECT_EQ(letter.reason, reason);
    EXPECT_EQ(letter.attempt, 0u);
    EXPECT_EQ(letter.fact.id, 77u);
    EXPECT_EQ(letter.fact.type, "order.placed");
    EXPECT_EQ(letter.fact.payload, fact.payload);
  }
  // A tag without its attempt is refused.
  std::string body;
  codec::PutString16(&body, "r");
  body.push_back(static_cast<char>(dead_letters::kAttemptTag));
  body.append("\x01\x02");
  EXPECT_TRUE(dead_letters::DecodeEntry(key, codec::Seal(body), &letter).IsCorruption());
}

// Retry records round-trip, list by consumer then partition, and refuse damaged values.
TEST(TablesTest, RetryRecordsRoundTrip) {
  TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.db(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  retries::RetryRecord record;
  record.fact_id = 42;
  record.attempts = 3;
  record.first_ms = 1'000;
  record.last_ms = 5'000;
  record.last_error = "subscriber-failed: downstream 503";
  for (auto [consumer, partition] :
       std::vector<std::pair<std::string, uint32_t>>{{"b", 0}, {"a", 256}, {"a", 1}, {"ab", 0}}) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), retries::Key(consumer, partition),
                        retries::EncodeValue(record))
                    .ok());
  }
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "retrz", "not a retry record").ok());
  std::vector<retries::RetryRecord> records;
  ASSERT_OK(retries::List(db.get(), db->DefaultColumnFamily(), "", &records));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].consumer, "a");
  EXPECT_EQ(records[0].partition, 1u);
  EXPECT_EQ(records[1].partition, 256u);
  EXPECT_EQ(records[2].consumer, "ab");
  EXPECT_EQ(records[3].consumer, "b");
  EXPECT_EQ(records[3].fact_id, 42u);
  EXPECT_EQ(records[3].attempts, 3u);
  EXPECT_EQ(records[3].first_ms, 1'000);
  EXPECT_EQ(records[3].last_ms, 5'000);
  EXPECT_EQ(records[3].last_error, record.last_error);
  ASSERT_OK(retries::List(db.get(), db->DefaultColumnFamily(), "a", &records));
  EXPECT_EQ(records.size(), 2u);  // not "ab"'s
  std::string value = retries::EncodeValue(record);
  EXPECT_TRUE(retries::DecodeValue(value.substr(0, value.size() - 1), &record).IsCorruption());
  EXPECT_TRUE(retries::DecodeValue(codec::Seal("short"), &record).IsCorruption());
}

TEST(TablesTest, LeaseKeysAreClassifiedAndMalformedOnesRefused) {
  leases::KeyKind kind;
  std::string_view name;  // views into the key it was decoded from: keep each key alive
  const std::string lease = leases::Key("orders"), fence = leases::FenceKey("orders"),
                    heartbeat = leases::HeartbeatKey("host-1");
  ASSERT_TRUE(leases::DecodeKey(lease, &kind, &name));
  EXPECT_EQ(kind, leases::KeyKind::kLease);
  EXPECT_EQ(name, "orders");
  ASSERT_TRUE(leases::DecodeKey(fence, &kind, &name));
  EXPECT_EQ(kind, leases::KeyKind::kFence);
  EXPECT_EQ(name, "orders");
  ASSERT_TRUE(leases::DecodeKey(heartbeat, &kind, &name));
  EXPECT_EQ(kind, leases::KeyKind::kHeartbeat);
  EXPECT_EQ(name, "host-1");
  EXPECT_FALSE(leases::DecodeKey("", &kind, &name));
  EXPECT_FALSE(leases::DecodeKey(leases::HeartbeatKey(""), &kind, &name));
  EXPECT_FALSE(leases::DecodeKey(std::string("a\0b", 3), &kind, &name));
  EXPECT_FALSE(leases::DecodeKey(std::string("\0e", 2), &kind, &name));

  leases::Record record{"host-1", 3, 1'700'000'000'000, 9};
  leases::Record decoded;
  ASSERT_OK(leases::DecodeValue(leases::EncodeValue(record), &decoded));
  EXPECT_EQ(decoded.owner, "host-1");
  EXPECT_EQ(decoded.epoch, 3u);
  EXPECT_EQ(decoded.expires_at_ms, 1'700'000'000'000);
  EXPECT_EQ(decoded.open_epoch, 9u);
  EXPECT_TRUE(leases::DecodeValue(leases::EncodeFence("host-1", 3), &decoded).IsCorruption());
}

TEST(TablesTest, MetaAndStateKeys) {
  uint64_t value = 0;
  std::string_view body;
  std::string sealed = meta::EncodeU64(0x0102030405060708);
  ASSERT_OK(codec::Unseal(sealed, &body));
  ASSERT_OK(meta::DecodeU64(body, "x", &value));
  EXPECT_EQ(value, 0x0102030405060708u);
  Status s = meta::DecodeU64("1234567", "last_lsn", &value);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("last_lsn"), std::string::npos) << s.ToString();
  EXPECT_EQ(meta::TypeKey("order.placed"), "type:order.placed");
  EXPECT_EQ(state::Key("rows", std::string("k\0", 2)), std::string("rows\0k\0", 7));
  EXPECT_LT(state::Key("a", "\xff\xff"), state::Key("a\x01", ""));  // tables never interleave
}

// A database with the default family holding `keys` (values: the key).
class ScanTest : public ::testing::Test {
 protected:
  void Open(const std::vector<std::string>& keys) {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.db(), &db).ok());
    db_.reset(db);
    for (const auto& key : keys) ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), key, key).ok());
  }
  std::vector<std::string> Forward(KeyRange range) {
    std::vector<std::string> seen;
    Scan scan(db_.get(), db_->DefaultColumnFamily(), std::move(range));
    for (scan.SeekToFirst(); scan.Valid(); scan.Next()) seen.emplace_back(scan.key());
    EXPECT_TRUE(scan.status().ok());
    return seen;
  }
  std::vector<std::string> Backward(KeyRange range) {
    std::vector<std::string> seen;
    Scan scan(db_.get(), db_->DefaultColumnFamily(), std::move(range));
    for (scan.SeekToLast(); scan.Valid(); scan.Prev()) seen.emplace_back(scan.key());
    return seen;
  }

  TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(ScanTest, OutboxRangesStopAtTheirBounds) {
  Open({outbox::Key(0, 9), outbox::Key(1, 1), outbox::Key(1, 2), outbox::Key(1, 3),
        outbox::Key(2, 0)});
  EXPECT_EQ(Forward(outbox::Range(1, 0)),
            (std::vector<std::string>{outbox::Key(1, 1), outbox::Key(1, 2), outbox::Key(1, 3)}));
  EXPECT_EQ(Forward(outbox::Range(1, 2, 2)), (std::vector<std::string>{outbox::Key(1, 2)}));
  EXPECT_EQ(Backward(outbox::Range(1, 0, 2)),
            (std::vector<std::string>{outbox::Key(1, 2), outbox::Key(1, 1)}));
  EXPECT_EQ(Forward(outbox::Range(3, 0)), std::vector<std::string>{});
}

TEST_F(ScanTest, ConsumerRangesHoldOnlyThatConsumer) {
  Open({cursors::Key("a", 0), cursors::Key("a", 5), cursors::Key("a\x01", 0), cursors::Key("ab", 1),
        cursors::Key("b", 0)});
  EXPECT_EQ(Forward(cursors::Range("a")),
            (std::vector<std::string>{cursors::Key("a", 0), cursors::Key("a", 5)}));
  EXPECT_EQ(Forward(cursors::Range("")).size(), 5u);  // the whole family
  std::vector<std::string> consumers;
  ASSERT_OK(cursors::ListConsumers(db_.get(), db_->DefaultColumnFamily(), &consumers));
  EXPECT_EQ(consumers, (std::vector<std::string>{"a", "a\x01", "ab", "b"}));
  std::vector<CursorInfo> infos;
  Status s = cursors::List(db_.get(), db_->DefaultColumnFamily(), "a", &infos);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();  // the values here are not cursor records
}

TEST_F(ScanTest, TimerDueRangeStopsAtNow) {
  Open({timers::Key(5, 1), timers::Key(10, 2), timers::Key(10, 3), timers::Key(11, 4)});
  EXPECT_EQ(Forward(timers::DueRange(10)).size(), 3u);
  EXPECT_EQ(Forward(timers::DueRange(4)).size(), 0u);
  EXPECT_EQ(Forward(WholeFamily()).size(), 4u);
}

TEST_F(ScanTest, HeartbeatsAndTypesArePrefixRanges) {
  Open({leases::Key("orders"), leases::FenceKey("orders"), leases::HeartbeatKey("h1"),
        leases::HeartbeatKey("h2"), "type:a", "type:b", "typf"});
  EXPECT_EQ(Forward(leases::HeartbeatRange()),
            (std::vector<std::string>{leases::HeartbeatKey("h1"), leases::HeartbeatKey("h2")}));
  // A record written before types had versions (empty body) reads as version 1.
  ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "type:a", codec::Seal("")).ok());
  ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "type:b", meta::EncodeTypeRecord(3, 2)).ok());
  std::vector<DeclaredType> types;
  ASSERT_OK(meta::ListTypes(db_.get(), db_->DefaultColumnFamily(), &types));
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].name, "a");
  EXPECT_EQ(types[0].version, 1u);
  EXPECT_EQ(types[0].first_version, 1u);
  EXPECT_EQ(types[1].name, "b");
  EXPECT_EQ(types[1].version, 3u);
  EXPECT_EQ(types[1].first_version, 2u);
}

TEST(TablesTest, ADamagedTypeRecordIsNamed) {
  DeclaredType record;
  EXPECT_OK(meta::DecodeTypeRecord("", &record));
  std::string body;
  codec::PutFixed32BE(&body, 2);
  codec::PutFixed32BE(&body, 3);  // first above declared
  Status s = meta::DecodeTypeRecord(body, &record);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("out of order"), std::string::npos) << s.ToString();
  s = meta::DecodeTypeRecord("abc", &record);
  EXPECT_NE(s.message().find("bad size"), std::string::npos) << s.ToString();
}

TEST(TablesTest, StateRowsRecordTheirTableVersion) {
  uint32_t version = 0;
  std::string_view value;
  // Version 1 is stored as rows always were: record version 1, the value alone.
  const std::string v1 = state::EncodeValue(1, "row");
  EXPECT_EQ(v1, codec::Seal("row"));
  ASSERT_OK(state::DecodeValue(v1, &version, &value));
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(value, "row");
  // Above it: record version 3, the version first.
  const std::string v7 = state::EncodeValue(7, "row");
  EXPECT_EQ(static_cast<uint8_t>(v7[0]), codec::kRowRecordVersion);
  ASSERT_OK(state::DecodeValue(v7, &version, &value));
  EXPECT_EQ(version, 7u);
  EXPECT_EQ(value, "row");
  ASSERT_OK(state::DecodeValue(state::EncodeValue(2, ""), &version, &value));
  EXPECT_EQ(value, "");
  // Damage is named: a flipped byte, a version-3 record claiming version 1, one too short, and a
  // record of a version rows never have (2, a fact's); other families never accept version 3.
  std::string flipped = v7;
  flipped.back() ^= 1;
  EXPECT_TRUE(state::DecodeValue(flipped, &version, &value).IsCorruption());
  std::string body;
  codec::PutFixed32BE(&body, 1);
  std::string claims_one;
  codec::Seal(body + "row", &claims_one, codec::kRowRecordVersion);
  Status s = state::DecodeValue(claims_one, &version, &value);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("claims table version 1"), std::string::npos) << s.ToString();
  std::string short_one;
  codec::Seal("ab", &short_one, codec::kRowRecordVersion);
  s = state::DecodeValue(short_one, &version, &value);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("shorter than its row version"), std::string::npos) << s.ToString();
  std::string fact_version = v1;
  fact_version[0] = static_cast<char>(codec::kFactRecordVersion);
  EXPECT_TRUE(state::DecodeValue(fact_version, &version, &value).IsCorruption());
  std::string_view unsealed;
  s = codec::Unseal(v7, &unsealed);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("version 3"), std::string::npos) << s.ToString();
}

TEST(TablesTest, KeysEndSortsAboveTheLongestKeys) {
  const std::string longest_state_key =
      state::Key(std::string(kTableBytesMax, '\xff'), std::string(kKeyBytesMax, '\xff'));
  EXPECT_LT(longest_state_key, KeysEnd());
  EXPECT_LT(cursors::Key(std::string(255, '\xff'), UINT32_MAX), KeysEnd());
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(WholeFamily().lower, "");
}

// The point readers of the table modules read from a real store: nothing stored is no error (and
// no bytes), what is stored comes back with its exact bytes, and bytes that do not decode are
// Corruption naming whose record they are.
TEST(TableReadTest, PointReadersReturnExactBytesAbsenceAndNamedCorruption) {
  TempDir dir;
  std::unique_ptr<internal::Store> store;
  ASSERT_OK(internal::Store::Open(dir.db(), EngineOptions(), internal::StoreHooks(), &store));
  auto put = [&](internal::Cf cf, const std::string& key, const std::string& value) {
    ASSERT_TRUE(store->db()->Put(rocksdb::WriteOptions(), store->cf(cf), key, value).ok());
  };

  cursors::Stored cursor;
  ASSERT_OK(cursors::Read(*store, "mailer", 3, &cursor));
  EXPECT_FALSE(cursor.sealed.has_value());
  EXPECT_EQ(cursor.fact_id, 0u);
  const std::string sealed = cursors::EncodeValue(41, 7);
  put(internal::kCursors, cursors::Key("mailer", 3), sealed);
  ASSERT_OK(cursors::Read(*store, "mailer", 3, &cursor));
  EXPECT_EQ(cursor.sealed, sealed);
  EXPECT_EQ(cursor.fact_id, 41u);
  EXPECT_EQ(cursor.epoch, 7u);
  put(internal::kCursors, cursors::Key("mailer", 4), "not a cursor");
  Status s = cursors::Read(*store, "mailer", 4, &cursor);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("cursor of mailer/4"), std::string::npos) << s.ToString();

  std::optional<retries::RetryRecord> retry;
  ASSERT_OK(retries::Read(*store, "mailer", 3, &retry));
  EXPECT_FALSE(retry.has_value());
  retries::RetryRecord written;
  written.fact_id = 41;
  written.attempts = 3;
  written.last_error = "smtp down";
  put(internal::kMeta, retries::Key("mailer", 3), retries::EncodeValue(written));
  ASSERT_OK(retries::Read(*store, "mailer", 3, &retry));
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->consumer, "mailer");
  EXPECT_EQ(retry->partition, 3u);
  EXPECT_EQ(retry->attempts, 3u);
  EXPECT_EQ(retry->last_error, "smtp down");
  put(internal::kMeta, retries::Key("mailer", 5), "garbage");
  s = retries::Read(*store, "mailer", 5, &retry);
  EXPECT_TRUE(s.IsCorruption() && s.message().find("retry record of mailer/5") != std::string::npos)
      << s.ToString();

  std::optional<std::string> lease;
  ASSERT_OK(leases::ReadSealed(*store, "mailer", &lease));
  EXPECT_FALSE(lease.has_value());
  put(internal::kLeases, leases::Key("mailer"), "sealed lease bytes");
  ASSERT_OK(leases::ReadSealed(*store, "mailer", &lease));
  EXPECT_EQ(lease, "sealed lease bytes");  // as stored: the check compares these bytes

  std::optional<RetentionLoss> loss;
  ASSERT_OK(retention::ReadLoss(*store, "mailer", &loss));
  EXPECT_FALSE(loss.has_value());
  put(internal::kMeta, retention::LossKey("mailer"), "garbage");
  s = retention::ReadLoss(*store, "mailer", &loss);
  EXPECT_TRUE(s.IsCorruption() && s.message().find("retention loss of mailer") != std::string::npos)
      << s.ToString();
  ASSERT_OK(store->Close());
}

}  // namespace
}  // namespace wharf::tables
