// Administration of cursors and dead letters (wharf/admin.h; trimming is in engine/trim.cc).
//
// Reads go straight to the store under the engine's read guard; every change is a TxnRep handed to
// the committer (the "one writer" rule). A change that replaces cursors carries a CheckOp for
// every partition's cursor key of the consumers it reads or writes, holding the sealed bytes it
// read (or "absent"): if anything changed between the read and the commit, the committer refuses
// the whole transaction with Conflict instead of silently overwriting the newer value.
//
// Epochs: a cursor's epoch belongs to the lease of the consumer that writes it, not to the
// position. Changes keep the epoch the target cursor already had (0 for a new cursor), so the
// consumer's own runtime is not mistaken for a stale holder after an operator moved it.
#include "wharf/admin.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <map>
#include <optional>

#include "engine/assert.h"
#include "engine/codec.h"
#include "engine/engine_core.h"

namespace wharf {

using internal::CheckOp;
using internal::EngineCore;
using internal::FromRocks;
using internal::TxnRep;
using internal::WriteOp;

namespace {

constexpr size_t kConsumerBytesMax = 255;
constexpr size_t kRetryBatchLetters = 100;  // dead letters re-emitted per transaction

// The sealed cursor value of each partition of one consumer (nullopt: no cursor).
using RawCursors = std::vector<std::optional<std::string>>;

// The smallest key greater than every key that starts with `prefix` (prefix ends with 0x00, so
// incrementing the last byte cannot overflow).
std::string PrefixEnd(std::string prefix) {
  WHARF_ASSERT(!prefix.empty());
  WHARF_ASSERT(static_cast<uint8_t>(prefix.back()) != 0xff);
  prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

// Reads every cursor of `consumer` with a bounded iterator. *count is the number present.
// REQUIRES: the caller holds the engine's read guard.
Status ReadRawCursors(const EngineCore& core, std::string_view consumer, RawCursors* cursors,
                      size_t* count) {
  uint32_t partitions = core.options().partitions;
  cursors->assign(partitions, std::nullopt);
  *count = 0;
  std::string lower = codec::CursorPrefix(consumer);
  std::string upper = PrefixEnd(lower);
  internal::BoundedIterator it(*core.store(), internal::kCursors, lower, upper);
  for (it.SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != lower.size() + 4) {
      return Status::Corruption("cursor key of consumer '" + std::string(consumer) + "' has " +
                                std::to_string(it->key().size()) + " bytes");
    }
    uint32_t partition = codec::DecodeFixed32BE(it->key().data() + lower.size());
    if (partition >= partitions) {
      return Status::Corruption("cursor of consumer '" + std::string(consumer) +
                                "' names partition " + std::to_string(partition) + " of " +
                                std::to_string(partitions));
    }
    uint64_t fact_id = 0, epoch = 0;
    Status s = codec::DecodeCursor(it->value().ToStringView(), &fact_id, &epoch);
    if (!s.ok()) {
      return Status::Corruption("cursor of " + std::string(consumer) + "/" +
                                std::to_string(partition) + ": " + s.message());
    }
    (*cursors)[partition] = it->value().ToString();
    ++*count;
  }
  return FromRocks(it->status(), "read cursors");
}

uint64_t EpochOf(const std::optional<std::string>& sealed) {
  if (!sealed) return 0;
  uint64_t fact_id = 0, epoch = 0;
  // Already verified by ReadRawCursors.
  Status s = codec::DecodeCursor(*sealed, &fact_id, &epoch);
  WHARF_ASSERT(s.ok());
  return epoch;
}

uint64_t FactIdOf(const std::optional<std::string>& sealed) {
  if (!sealed) return 0;
  uint64_t fact_id = 0, epoch = 0;
  Status s = codec::DecodeCursor(*sealed, &fact_id, &epoch);
  WHARF_ASSERT(s.ok());
  return fact_id;
}

// Adds a check per partition that the consumer's cursors are still exactly `cursors`.
void AddCursorChecks(std::string_view consumer, const RawCursors& cursors, TxnRep* rep) {
  for (uint32_t partition = 0; partition < cursors.size(); ++partition) {
    rep->checks.push_back(
        CheckOp{internal::kCursors, codec::CursorKey(consumer, partition), cursors[partition],
                "cursor of " + std::string(consumer) + "/" + std::to_string(partition)});
  }
}

Status ValidateConsumer(std::string_view consumer) {
  return internal::ValidateName("consumer id", consumer, kConsumerBytesMax);
}

// The id of the last durable fact of `partition` with id <= fact_id, 0 if none.
// REQUIRES: the caller holds the engine's read guard.
Status LastFactAtOrBefore(const EngineCore& core, uint32_t partition, uint64_t fact_id,
                          uint64_t* found) {
  *found = 0;
  fact_id = std::min(fact_id, core.committer()->durable_lsn());
  if (fact_id == 0) return Status::OK();
  std::string lower = codec::OutboxKey(partition, 0);
  std::string upper = fact_id == UINT64_MAX ? codec::OutboxKey(partition + 1, 0)
                                            : codec::OutboxKey(partition, fact_id + 1);
  internal::BoundedIterator it(*core.store(), internal::kOutbox, lower, upper);
  it->SeekToLast();
  if (it->Valid()) {
    if (it->key().size() != codec::kOutboxKeyBytes) {
      return Status::Corruption("outbox key of " + std::to_string(it->key().size()) + " bytes");
    }
    uint32_t key_partition = 0;
    codec::DecodeOutboxKey(it->key().ToStringView(), &key_partition, found);
    WHARF_ASSERT(key_partition == partition);
    WHARF_ASSERT(*found <= fact_id);
  }
  return FromRocks(it->status(), "read outbox");
}

}  // namespace

Status ListCursors(Engine& engine, std::vector<CursorInfo>* cursors) {
  if (cursors == nullptr) return Status::InvalidArgument("cursors output pointer is null");
  EngineCore& core = *engine.core();
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  cursors->clear();
  auto* store = core.store();
  std::unique_ptr<rocksdb::Iterator> it(
      store->db()->NewIterator(rocksdb::ReadOptions(), store->cf(internal::kCursors)));
  // Keys sort by consumer then partition: consumer ids hold no NUL, and 0x00 ends each one.
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string_view key = it->key().ToStringView();
    if (key.size() < 6 || key[key.size() - 5] != '\0') {
      return Status::Corruption("cursor key of " + std::to_string(key.size()) +
                                " bytes is malformed");
    }
    CursorInfo& info = cursors->emplace_back();
    info.consumer.assign(key.substr(0, key.size() - 5));
    info.partition = codec::DecodeFixed32BE(key.data() + key.size() - 4);
    s = codec::DecodeCursor(it->value().ToStringView(), &info.fact_id, &info.epoch);
    if (!s.ok()) {
      return Status::Corruption("cursor of " + info.consumer + "/" +
                                std::to_string(info.partition) + ": " + s.message());
    }
  }
  return FromRocks(it->status(), "list cursors");
}

Status GetCursor(Engine& engine, std::string_view consumer, uint32_t partition, uint64_t* fact_id) {
  if (fact_id == nullptr) return Status::InvalidArgument("fact_id output pointer is null");
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *engine.core();
  auto guard = core.ReadGuard();
  s = core.CheckOpen();
  if (!s.ok()) return s;
  if (partition >= core.options().partitions) {
    return Status::InvalidArgument("partition " + std::to_string(partition) + " >= partitions " +
                                   std::to_string(core.options().partitions));
  }
  std::string sealed;
  rocksdb::Status read =
      core.store()->db()->Get(rocksdb::ReadOptions(), core.store()->cf(internal::kCursors),
                              codec::CursorKey(consumer, partition), &sealed);
  *fact_id = 0;
  if (read.IsNotFound()) return Status::OK();
  if (!read.ok()) return FromRocks(read, "read cursor");
  uint64_t epoch = 0;
  s = codec::DecodeCursor(sealed, fact_id, &epoch);
  if (!s.ok()) {
    return Status::Corruption("cursor of " + std::string(consumer) + "/" +
                              std::to_string(partition) + ": " + s.message());
  }
  return Status::OK();
}

Status CopyCursor(Engine& engine, std::string_view from, std::string_view to, bool force) {
  Status s = ValidateConsumer(from);
  if (s.ok()) s = ValidateConsumer(to);
  if (!s.ok()) return s;
  if (from == to)
    return Status::InvalidArgument("cannot copy the cursors of '" + std::string(from) +
                                   "' onto themselves");
  EngineCore& core = *engine.core();
  TxnRep rep;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (!s.ok()) return s;
    RawCursors source, target;
    size_t source_count = 0, target_count = 0;
    s = ReadRawCursors(core, from, &source, &source_count);
    if (s.ok()) s = ReadRawCursors(core, to, &target, &target_count);
    if (!s.ok()) return s;
    if (source_count == 0) {
      return Status::NotFound("consumer '" + std::string(from) + "' has no cursors");
    }
    if (target_count > 0 && !force) {
      return Status::InvalidArgument("consumer '" + std::string(to) + "' already has " +
                                     std::to_string(target_count) +
                                     " cursors (force to overwrite them)");
    }
    AddCursorChecks(from, source, &rep);
    AddCursorChecks(to, target, &rep);
    for (uint32_t partition = 0; partition < source.size(); ++partition) {
      std::string key = codec::CursorKey(to, partition);
      if (source[partition]) {
        std::string value =
            codec::EncodeCursor(FactIdOf(source[partition]), EpochOf(target[partition]));
        rep.writes.push_back(WriteOp{internal::kCursors, false, std::move(key), std::move(value)});
      } else if (target[partition]) {
        // The copy is exact: a partition the source never passed starts from zero.
        rep.writes.push_back(WriteOp{internal::kCursors, true, std::move(key), ""});
      }
    }
  }
  WHARF_DASSERT(!rep.writes.empty());
  return core.Commit(&rep);
}

Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id) {
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *engine.core();
  TxnRep rep;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (!s.ok()) return s;
    RawCursors current;
    size_t count = 0;
    s = ReadRawCursors(core, consumer, &current, &count);
    if (!s.ok()) return s;
    AddCursorChecks(consumer, current, &rep);
    for (uint32_t partition = 0; partition < current.size(); ++partition) {
      uint64_t position = 0;
      s = LastFactAtOrBefore(core, partition, fact_id, &position);
      if (!s.ok()) return s;
      rep.writes.push_back(WriteOp{internal::kCursors, false, codec::CursorKey(consumer, partition),
                                   codec::EncodeCursor(position, EpochOf(current[partition]))});
    }
  }
  WHARF_DASSERT(rep.writes.size() == core.options().partitions);
  return core.Commit(&rep);
}

Status DeleteCursor(Engine& engine, std::string_view consumer) {
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *engine.core();
  TxnRep rep;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (!s.ok()) return s;
    RawCursors current;
    size_t count = 0;
    s = ReadRawCursors(core, consumer, &current, &count);
    if (!s.ok()) return s;
    if (count == 0) {
      return Status::NotFound("consumer '" + std::string(consumer) + "' has no cursors");
    }
    AddCursorChecks(consumer, current, &rep);
    for (uint32_t partition = 0; partition < current.size(); ++partition) {
      if (!current[partition]) continue;
      rep.writes.push_back(
          WriteOp{internal::kCursors, true, codec::CursorKey(consumer, partition), ""});
    }
  }
  WHARF_DASSERT(!rep.writes.empty());
  return core.Commit(&rep);
}

Status ListDeadLetters(Engine& engine, std::string_view consumer, std::vector<DeadLetter>* out) {
  if (out == nullptr) return Status::InvalidArgument("dead letters output pointer is null");
  if (!consumer.empty()) {
    Status s = ValidateConsumer(consumer);
    if (!s.ok()) return s;
  }
  EngineCore& core = *engine.core();
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  out->clear();
  std::string lower = consumer.empty() ? std::string() : codec::CursorPrefix(consumer);
  std::string upper = consumer.empty() ? std::string() : PrefixEnd(lower);
  rocksdb::Slice lower_slice(lower), upper_slice(upper);
  rocksdb::ReadOptions read_options;
  if (!consumer.empty()) {
    read_options.iterate_lower_bound = &lower_slice;
    read_options.iterate_upper_bound = &upper_slice;
  }
  auto* store = core.store();
  std::unique_ptr<rocksdb::Iterator> it(
      store->db()->NewIterator(read_options, store->cf(internal::kDead)));
  for (it->Seek(lower_slice); it->Valid(); it->Next()) {
    std::string_view key = it->key().ToStringView();
    if (key.size() < 10 || key[key.size() - 9] != '\0') {
      return Status::Corruption("dead letter key of " + std::to_string(key.size()) +
                                " bytes is malformed");
    }
    DeadLetter& letter = out->emplace_back();
    letter.consumer.assign(key.substr(0, key.size() - 9));
    uint64_t lsn = codec::DecodeFixed64BE(key.data() + key.size() - 8);
    s = codec::DecodeDeadLetter(it->value().ToStringView(), &letter.reason, &letter.fact);
    if (!s.ok()) {
      return Status::Corruption("dead letter " + std::to_string(lsn) + " of " + letter.consumer +
                                ": " + s.message());
    }
    letter.fact.id = lsn;
  }
  return FromRocks(it->status(), "list dead letters");
}

namespace {

// A dead letter as stored (for the compare-and-set of its deletion) and decoded.
struct StoredLetter {
  std::string sealed;
  DeadLetter letter;
};

// Every dead letter of `consumer`, by fact id.
// REQUIRES: the caller holds the engine's read guard.
Status ReadStoredLetters(const EngineCore& core, std::string_view consumer,
                         std::map<uint64_t, StoredLetter>* letters) {
  letters->clear();
  std::string lower = codec::CursorPrefix(consumer);
  std::string upper = PrefixEnd(lower);
  internal::BoundedIterator it(*core.store(), internal::kDead, lower, upper);
  for (it.SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != lower.size() + 8) {
      return Status::Corruption("dead letter key of consumer '" + std::string(consumer) + "' has " +
                                std::to_string(it->key().size()) + " bytes");
    }
    uint64_t lsn = codec::DecodeFixed64BE(it->key().data() + lower.size());
    StoredLetter& stored = (*letters)[lsn];
    stored.sealed = it->value().ToString();
    stored.letter.consumer.assign(consumer);
    Status s = codec::DecodeDeadLetter(stored.sealed, &stored.letter.reason, &stored.letter.fact);
    if (!s.ok()) {
      return Status::Corruption("dead letter " + std::to_string(lsn) + " of " +
                                std::string(consumer) + ": " + s.message());
    }
    stored.letter.fact.id = lsn;
  }
  return FromRocks(it->status(), "read dead letters");
}

}  // namespace

Status RetryDeadLetters(Engine& engine, std::string_view consumer,
                        const std::vector<uint64_t>& fact_ids,
                        std::vector<RetriedLetter>* retried) {
  if (retried == nullptr) return Status::InvalidArgument("retried output pointer is null");
  retried->clear();
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *engine.core();
  std::map<uint64_t, StoredLetter> letters;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (s.ok()) s = ReadStoredLetters(core, consumer, &letters);
    if (!s.ok()) return s;
  }
  if (letters.empty()) {
    return Status::NotFound("consumer '" + std::string(consumer) + "' has no dead letters");
  }
  std::vector<const StoredLetter*> chosen;
  if (fact_ids.empty()) {
    for (const auto& [id, stored] : letters) chosen.push_back(&stored);
  } else {
    for (uint64_t id : fact_ids) {
      auto it = letters.find(id);
      if (it == letters.end()) {
        return Status::NotFound("consumer '" + std::string(consumer) +
                                "' has no dead letter for fact " + std::to_string(id));
      }
      if (std::find(chosen.begin(), chosen.end(), &it->second) == chosen.end()) {
        chosen.push_back(&it->second);
      }
    }
  }
  for (size_t first = 0; first < chosen.size(); first += kRetryBatchLetters) {
    size_t last = std::min(chosen.size(), first + kRetryBatchLetters);
    Txn txn = engine.Begin();
    TxnRep* rep = EngineCore::RepOf(txn);
    for (size_t i = first; i < last; ++i) {
      const Fact& fact = chosen[i]->letter.fact;
      std::string what = "dead letter " + std::to_string(fact.id) + " of " + std::string(consumer);
      EmitOptions options;
      options.v = fact.v;
      for (const auto& header : fact.headers) {
        if (header.first != kRetryForHeader && header.first != kRetryOfHeader) {
          options.headers.push_back(header);
        }
      }
      options.headers.emplace_back(std::string(kRetryForHeader), std::string(consumer));
      options.headers.emplace_back(std::string(kRetryOfHeader), std::to_string(fact.id));
      s = internal::EmitWithOrigin(txn, fact.type, fact.key, fact.payload, options, fact.source,
                                   fact.depth);
      if (s.IsInvalidArgument()) return Status::InvalidArgument(what + ": " + s.message());
      if (!s.ok()) return s;
      std::string key = codec::DeadKey(consumer, fact.id);
      rep->checks.push_back(CheckOp{internal::kDead, key, chosen[i]->sealed, what});
      rep->writes.push_back(WriteOp{internal::kDead, true, std::move(key), ""});
    }
    CommitResult result;
    s = txn.Commit(&result);
    if (!s.ok()) return s;
    WHARF_DASSERT(result.last_fact_id - result.first_fact_id + 1 == last - first);
    for (size_t i = first; i < last; ++i) {
      retried->push_back(
          RetriedLetter{chosen[i]->letter.fact.id, result.first_fact_id + (i - first)});
    }
  }
  return Status::OK();
}

}  // namespace wharf
