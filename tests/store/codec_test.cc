// Record codec: fact records of format version 2 (scheduled_id, the committer's O(1) commit_ms
// stamp) and the version-1 records written before them, which must still decode.
#include "engine/store/codec.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include "test_util.h"

namespace wharf {
namespace {

Fact SampleFact() {
  Fact fact;
  fact.type = "OrderPlaced";
  fact.key = std::string("k\0ey", 4);
  fact.payload = "{\"total\":7}";
  fact.headers = {{"trace-id", "abc"}};
  fact.source = "orders";
  fact.v = 3;
  fact.depth = 2;
  fact.partition = 5;
  fact.deliver_at_ms = 1'700'000'000'123;
  fact.scheduled_id = 42;
  return fact;
}

void PutLE(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

// A version-1 fact record, laid out by hand as the earlier code wrote it (no scheduled_id; the
// checksum is xxh3 of the whole body), independently of EncodeFact.
std::string VersionOneRecord(const Fact& fact) {
  std::string body;
  PutLE(&body, static_cast<uint64_t>(fact.commit_ms), 8);
  PutLE(&body, static_cast<uint64_t>(fact.deliver_at_ms), 8);
  PutLE(&body, fact.v, 4);
  PutLE(&body, fact.depth, 4);
  PutLE(&body, fact.partition, 4);
  for (const std::string* text : {&fact.type, &fact.key, &fact.source}) {
    PutLE(&body, text->size(), 2);
    body += *text;
  }
  PutLE(&body, fact.headers.size(), 2);
  for (const auto& [name, value] : fact.headers) {
    PutLE(&body, name.size(), 2);
    body += name;
    PutLE(&body, value.size(), 4);
    body += value;
  }
  PutLE(&body, fact.payload.size(), 4);
  body += fact.payload;
  std::string record(1, '\1');
  PutLE(&record, XXH3_64bits(body.data(), body.size()), 8);
  return record + body;
}

void ExpectSameFields(const Fact& decoded, const Fact& expected) {
  EXPECT_EQ(decoded.type, expected.type);
  EXPECT_EQ(decoded.key, expected.key);
  EXPECT_EQ(decoded.payload, expected.payload);
  EXPECT_EQ(decoded.headers, expected.headers);
  EXPECT_EQ(decoded.source, expected.source);
  EXPECT_EQ(decoded.v, expected.v);
  EXPECT_EQ(decoded.depth, expected.depth);
  EXPECT_EQ(decoded.partition, expected.partition);
  EXPECT_EQ(decoded.deliver_at_ms, expected.deliver_at_ms);
  EXPECT_EQ(decoded.commit_ms, expected.commit_ms);
  EXPECT_EQ(decoded.scheduled_id, expected.scheduled_id);
}

// Every field survives a round trip, scheduled_id included.
TEST(CodecTest, FactRoundTrip) {
  const Fact fact = SampleFact();
  const std::string record = codec::EncodeFact(fact);
  EXPECT_EQ(static_cast<uint8_t>(record[0]), codec::kFactRecordVersion);
  Fact decoded;
  ASSERT_OK(codec::DecodeFact(record, &decoded));
  ExpectSameFields(decoded, fact);
}

// The committer's stamp rewrites commit_ms and keeps the checksum valid; a flipped bit in the
// stamp or in the rest of the record is still caught.
TEST(CodecTest, CommitStampKeepsTheChecksum) {
  Fact fact = SampleFact();
  std::string record = codec::EncodeFact(fact);
  codec::StampCommitMs(&record, 1'700'000'000'999);
  Fact decoded;
  ASSERT_OK(codec::DecodeFact(record, &decoded));
  fact.commit_ms = 1'700'000'000'999;
  ExpectSameFields(decoded, fact);
  codec::StampCommitMs(&record, 7);  // stamping again (never done, but the algebra allows it)
  ASSERT_OK(codec::DecodeFact(record, &decoded));
  EXPECT_EQ(decoded.commit_ms, 7);

  for (size_t at : {codec::kEnvelopeBytes, codec::kEnvelopeBytes + 7, codec::kEnvelopeBytes + 8,
                    record.size() - 1}) {
    std::string damaged = record;
    damaged[at] ^= 0x10;
    Status s = codec::DecodeFact(damaged, &decoded);
    EXPECT_TRUE(s.IsCorruption()) << "byte " << at << ": " << s.ToString();
  }
}

// A record written by the earlier format (version 1) decodes, with scheduled_id 0; the same bytes
// with a damaged body, or a version this build does not know, are Corruption.
TEST(CodecTest, VersionOneFactRecordStillDecodes) {
  Fact fact = SampleFact();
  fact.scheduled_id = 0;  // version 1 has no such field
  fact.commit_ms = 1'600'000'000'000;
  const std::string old_record = VersionOneRecord(fact);
  Fact decoded;
  decoded.scheduled_id = 99;
  ASSERT_OK(codec::DecodeFact(old_record, &decoded));
  ExpectSameFields(decoded, fact);

  std::string damaged = old_record;
  damaged.back() ^= 1;
  EXPECT_TRUE(codec::DecodeFact(damaged, &decoded).IsCorruption());
  std::string future = old_record;
  future[0] = 3;
  Status s = codec::DecodeFact(future, &decoded);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("version 3"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace wharf
