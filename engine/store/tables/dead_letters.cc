#include "engine/store/tables/dead_letters.h"

#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/cursors.h"

namespace wharf::tables::dead_letters {

std::string Key(std::string_view consumer, uint64_t lsn) {
  std::string encoded = cursors::Prefix(consumer);  // the same consumer id · 0x00 prefix
  codec::PutFixed64BE(&encoded, lsn);
  return encoded;
}

bool DecodeKey(std::string_view key, std::string_view* consumer, uint64_t* lsn) {
  std::string_view suffix;
  if (!cursors::SplitConsumerKey(key, kSuffixBytes - 1, consumer, &suffix)) return false;
  *lsn = codec::DecodeFixed64BE(suffix.data());
  return true;
}

KeyRange Range(std::string_view consumer) { return cursors::Range(consumer); }

std::string EncodeValue(std::string_view reason, std::string_view fact_record, uint32_t attempt) {
  std::string body;
  codec::PutString16(&body, reason.substr(0, 0xffff));
  body.push_back(static_cast<char>(kAttemptTag));
  codec::PutFixed32BE(&body, attempt);
  body.append(fact_record);
  return codec::Seal(body);
}

Status DecodeValue(std::string_view sealed, std::string* reason, Fact* fact, uint32_t* attempt) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("dead letter: " + s.message());
  if (!codec::GetString16(&body, reason)) return Status::Corruption("dead letter is truncated");
  uint32_t recorded = 0;  // written before attempts were recorded
  if (!body.empty() && static_cast<uint8_t>(body[0]) == kAttemptTag) {
    if (body.size() < 5) return Status::Corruption("dead letter's attempt is truncated");
    recorded = codec::DecodeFixed32BE(body.data() + 1);
    body.remove_prefix(5);
  }
  if (attempt != nullptr) *attempt = recorded;
  s = codec::DecodeFact(body, fact);
  if (!s.ok()) return Status::Corruption("dead letter's fact: " + s.message());
  return Status::OK();
}

Status DecodeEntry(std::string_view key, std::string_view value, DeadLetter* letter) {
  std::string_view consumer;
  uint64_t lsn = 0;
  if (!DecodeKey(key, &consumer, &lsn)) {
    return Status::Corruption("dead letter key of " + std::to_string(key.size()) +
                              " bytes is malformed");
  }
  letter->consumer.assign(consumer);
  Status s = DecodeValue(value, &letter->reason, &letter->fact, &letter->attempt);
  if (!s.ok()) {
    return Status::Corruption("dead letter " + std::to_string(lsn) + " of " + letter->consumer +
                              ": " + s.message());
  }
  letter->fact.id = lsn;
  return Status::OK();
}

Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view consumer,
            std::vector<DeadLetter>* letters) {
  return DecodeAll(db, cf, Range(consumer), "dead letters", DecodeEntry, letters);
}

}  // namespace wharf::tables::dead_letters
