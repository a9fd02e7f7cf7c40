// Record codec: fact records of format version 2 (scheduled_id, the committer's O(1) commit_ms
// stamp) and the version-1 records written before them, which must still decode; the envelope's,
// the big-endian integers' and the fact decoder's edge cases.
#include "engine/store/codec.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// ---------------------------------------------------------------------------------------------
// Edge cases of the envelope, the integers keys are made of, and the fact decoder on damaged input.

// A version-2 record around `body`, sealed as EncodeFact seals (checksum computed here, apart from
// the codec): lets a test hand the decoder any body with a valid checksum.
std::string SealVersionTwo(std::string_view body) {
  std::string record(1, static_cast<char>(codec::kFactRecordVersion));
  const uint64_t checksum =
      XXH3_64bits(body.data() + codec::kStampBytes, body.size() - codec::kStampBytes) ^
      XXH3_64bits(body.data(), codec::kStampBytes);
  PutLE(&record, checksum, 8);
  return record.append(body);
}

// Big-endian integers: the byte layout keys rely on, and byte order equal to numeric order (what
// makes RocksDB's bytewise scans walk ids in order).
TEST(CodecTest, BigEndianIntegers) {
  std::string bytes;
  codec::PutFixed32BE(&bytes, 0x01020304u);
  codec::PutFixed64BE(&bytes, 0x0a0b0c0d0e0f1011ull);
  EXPECT_EQ(bytes, std::string("\x01\x02\x03\x04\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11", 12));
  EXPECT_EQ(codec::DecodeFixed32BE(bytes.data()), 0x01020304u);
  EXPECT_EQ(codec::DecodeFixed64BE(bytes.data() + 4), 0x0a0b0c0d0e0f1011ull);
  const uint64_t values[] = {
      0, 1, 255, 256, 65535, 65536, uint64_t{1} << 32, UINT64_MAX - 1, UINT64_MAX};
  for (uint64_t value : values) {
    std::string encoded;
    codec::PutFixed64BE(&encoded, value);
    ASSERT_EQ(encoded.size(), 8u);
    EXPECT_EQ(codec::DecodeFixed64BE(encoded.data()), value);
    for (uint64_t other : values) {
      std::string other_encoded;
      codec::PutFixed64BE(&other_encoded, other);
      EXPECT_EQ(encoded < other_encoded, value < other) << value << " vs " << other;
    }
  }
  for (uint32_t value : {0u, 1u, 0x80000000u, UINT32_MAX}) {
    std::string encoded;
    codec::PutFixed32BE(&encoded, value);
    EXPECT_EQ(codec::DecodeFixed32BE(encoded.data()), value);
  }
}

// Length-prefixed strings: empty, binary and the longest one round trip; a truncated prefix or body
// is refused and consumes nothing.
TEST(CodecTest, String16RoundTripAndTruncation) {
  const std::string longest(0xffff, 'x');
  const std::string texts[] = {"", std::string("a\0b", 3), "type", longest};
  std::string all;
  for (const std::string& text : texts) codec::PutString16(&all, text);
  EXPECT_EQ(all.size(), 4 * 2 + 0 + 3 + 4 + 0xffff);
  std::string_view input = all;
  for (const std::string& text : texts) {
    std::string out = "stale";
    ASSERT_TRUE(codec::GetString16(&input, &out));
    EXPECT_EQ(out, text);
  }
  EXPECT_TRUE(input.empty());

  std::string one;
  codec::PutString16(&one, "hello");
  for (size_t length = 0; length < one.size(); ++length) {
    std::string_view truncated(one.data(), length);
    std::string out;
    EXPECT_FALSE(codec::GetString16(&truncated, &out)) << length;
    EXPECT_EQ(truncated.size(), length) << "a refused read consumed input";
  }
}

// The envelope: Seal and SealInPlace agree, any body (empty included) unseals to itself, and a
// short, unknown-version or damaged envelope is Corruption saying which.
TEST(CodecTest, EnvelopeEdgeCases) {
  for (const std::string& body : {std::string(), std::string("x"), std::string(1000, '\0')}) {
    const std::string sealed = codec::Seal(body);
    EXPECT_EQ(sealed.size(), codec::kEnvelopeBytes + body.size());
    EXPECT_EQ(static_cast<uint8_t>(sealed[0]), codec::kRecordVersion);
    std::string in_place(codec::kEnvelopeBytes, '?');
    in_place += body;
    codec::SealInPlace(&in_place);
    EXPECT_EQ(in_place, sealed);
    std::string_view unsealed;
    uint8_t version = 0;
    ASSERT_OK(codec::Unseal(sealed, &unsealed, &version));
    EXPECT_EQ(unsealed, body);
    EXPECT_EQ(version, codec::kRecordVersion);
  }

  const std::string sealed = codec::Seal("body");
  std::string_view body;
  for (size_t length = 0; length < codec::kEnvelopeBytes; ++length) {
    Status s = codec::Unseal(std::string_view(sealed.data(), length), &body);
    EXPECT_TRUE(s.IsCorruption()) << length;
    EXPECT_NE(s.message().find("shorter than its envelope"), std::string::npos) << s.ToString();
  }
  for (uint8_t version : {0, 3, 255}) {
    std::string other = sealed;
    other[0] = static_cast<char>(version);
    Status s = codec::Unseal(other, &body);
    EXPECT_TRUE(s.IsCorruption());
    EXPECT_NE(s.message().find("version " + std::to_string(version)), std::string::npos)
        << s.ToString();
  }
  for (size_t at = 1; at < sealed.size(); ++at) {  // checksum bytes and body bytes
    std::string damaged = sealed;
    damaged[at] ^= 0x01;
    Status s = codec::Unseal(damaged, &body);
    EXPECT_TRUE(s.IsCorruption()) << at;
    EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.ToString();
  }
  // A version-2 record must hold at least its commit stamp.
  std::string short_fact(1, static_cast<char>(codec::kFactRecordVersion));
  short_fact += std::string(8 + codec::kStampBytes - 1, '\0');
  Status s = codec::Unseal(short_fact, &body);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("stamp"), std::string::npos) << s.ToString();
}

// kTrusted skips the checksum of a record that never left memory (a version-1 record here, which
// debug builds do not re-check either); kChecksum, the default, does not.
TEST(CodecTest, TrustedRecordsSkipTheChecksum) {
  std::string sealed = codec::Seal("body");
  sealed[1] ^= 0x01;  // the checksum only
  std::string_view body;
  EXPECT_TRUE(codec::Unseal(sealed, &body).IsCorruption());
  ASSERT_OK(codec::Unseal(sealed, &body, nullptr, codec::Verify::kTrusted));
  EXPECT_EQ(body, "body");
}

// The smallest fact (every string empty, no header) and one with binary fields at their widths
// round trip; the record's size is what the format says.
TEST(CodecTest, EmptyAndWideFactsRoundTrip) {
  Fact empty;
  std::string record = codec::EncodeFact(empty);
  // envelope, commit_ms, deliver_at_ms, scheduled_id, v, depth, partition, 3 u16 lengths,
  // u16 header count, u32 payload length.
  EXPECT_EQ(record.size(), codec::kEnvelopeBytes + 8 + 8 + 8 + 4 + 4 + 4 + 3 * 2 + 2 + 4);
  Fact decoded = SampleFact();
  ASSERT_OK(codec::DecodeFact(record, &decoded));
  ExpectSameFields(decoded, empty);

  Fact wide;
  wide.type = std::string(kTypeBytesMax, 'T');
  wide.key = std::string(kKeyBytesMax, '\0');
  wide.source = std::string(300, '\xff');
  wide.payload = std::string(70000, '\x01');  // longer than a u16 length could say
  for (size_t i = 0; i < kHeaderCountMax; ++i) {
    wide.headers.emplace_back("h" + std::to_string(i), std::string(i, '\0'));
  }
  wide.v = UINT32_MAX;
  wide.depth = UINT32_MAX;
  wide.partition = kPartitionsMax - 1;
  wide.deliver_at_ms = INT64_MAX;
  wide.commit_ms = -1;
  wide.scheduled_id = UINT64_MAX;
  record = codec::EncodeFact(wide);
  codec::StampCommitMs(&record, INT64_MIN);
  wide.commit_ms = INT64_MIN;
  ASSERT_OK(codec::DecodeFact(record, &decoded));
  ExpectSameFields(decoded, wide);
}

// A body cut short anywhere, or with bytes after the payload, is Corruption even when its
// checksum is valid (a record written by a faulty encoder, not damaged on disk).
TEST(CodecTest, TruncatedOrOverlongBodiesAreCorruption) {
  const std::string record = codec::EncodeFact(SampleFact());
  const std::string_view body = std::string_view(record).substr(codec::kEnvelopeBytes);
  Fact decoded;
  ASSERT_OK(codec::DecodeFact(SealVersionTwo(body), &decoded));  // the helper seals as the codec
  for (size_t length = codec::kStampBytes; length < body.size(); ++length) {
    Status s = codec::DecodeFact(SealVersionTwo(body.substr(0, length)), &decoded);
    EXPECT_TRUE(s.IsCorruption()) << length << ": " << s.ToString();
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();
  }
  std::string overlong(body);
  overlong.push_back('\0');
  Status s = codec::DecodeFact(SealVersionTwo(overlong), &decoded);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("trailing bytes"), std::string::npos) << s.ToString();
  // A header count larger than the headers present.
  std::string lying(body);
  const size_t count_at = 8 + 8 + 8 + 4 + 4 + 4 + 2 + SampleFact().type.size() + 2 +
                          SampleFact().key.size() + 2 + SampleFact().source.size();
  ASSERT_EQ(static_cast<uint8_t>(lying[count_at]), SampleFact().headers.size());
  lying[count_at] = 100;
  EXPECT_TRUE(codec::DecodeFact(SealVersionTwo(lying), &decoded).IsCorruption());
}

// Keys map to a partition in range, the same one every time; one partition takes every key, and
// many keys reach every partition.
TEST(CodecTest, PartitionOfKey) {
  EXPECT_EQ(codec::PartitionOfKey("", 1), 0u);
  EXPECT_EQ(codec::PartitionOfKey("anything", 1), 0u);
  std::vector<int> hits(16, 0);
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const uint32_t partition = codec::PartitionOfKey(key, 16);
    ASSERT_LT(partition, 16u);
    EXPECT_EQ(codec::PartitionOfKey(key, 16), partition);
    EXPECT_EQ(partition, XXH3_64bits(key.data(), key.size()) % 16);
    hits[partition]++;
  }
  for (int count : hits) EXPECT_GT(count, 0);
  EXPECT_LT(codec::PartitionOfKey(std::string(kKeyBytesMax, '\xff'), kPartitionsMax),
            kPartitionsMax);
}

}  // namespace
}  // namespace wharf
