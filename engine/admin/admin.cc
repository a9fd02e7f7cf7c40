// Administration of cursors and dead letters (wharf/admin.h; trimming is engine/admin/trim.cc).
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

#include "engine/admin/consumer_id.h"
#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/retention/retention.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/retries.h"
#include "engine/store/tables/scan.h"

namespace wharf {

using internal::CheckOp;
using internal::EngineCore;
using internal::FromRocks;
using internal::TxnRep;
using internal::ValidateConsumer;
using internal::WriteOp;

namespace {

constexpr size_t kRetryBatchLetters = 100;  // dead letters re-emitted per transaction

// The sealed cursor value of each partition of one consumer (nullopt: no cursor).
using RawCursors = std::vector<std::optional<std::string>>;

// Reads every cursor of `consumer` with a bounded iterator. *count is the number present.
// REQUIRES: the caller holds the engine's read guard.
Status ReadRawCursors(const EngineCore& core, std::string_view consumer, RawCursors* cursors,
                      size_t* count) {
  uint32_t partitions = core.options().partitions;
  cursors->assign(partitions, std::nullopt);
  *count = 0;
  tables::Scan scan(core.store()->db(), core.store()->cf(internal::kCursors),
                    tables::cursors::Range(consumer));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    std::string_view key_consumer;
    uint32_t partition = 0;
    if (!tables::cursors::DecodeKey(scan.key(), &key_consumer, &partition)) {
      return Status::Corruption("cursor key of consumer '" + std::string(consumer) + "' has " +
                                std::to_string(scan.key().size()) + " bytes");
    }
    WHARF_ASSERT(key_consumer == consumer);  // the range holds only this consumer's keys
    if (partition >= partitions) {
      return Status::Corruption("cursor of consumer '" + std::string(consumer) +
                                "' names partition " + std::to_string(partition) + " of " +
                                std::to_string(partitions));
    }
    uint64_t fact_id = 0, epoch = 0;
    Status s = tables::cursors::DecodeValue(scan.value(), &fact_id, &epoch);
    if (!s.ok()) {
      return Status::Corruption("cursor of " + std::string(consumer) + "/" +
                                std::to_string(partition) + ": " + s.message());
    }
    (*cursors)[partition] = std::string(scan.value());
    ++*count;
  }
  return FromRocks(scan.status(), "read cursors");
}

uint64_t EpochOf(const std::optional<std::string>& sealed) {
  if (!sealed) return 0;
  uint64_t fact_id = 0, epoch = 0;
  // Already verified by ReadRawCursors.
  Status s = tables::cursors::DecodeValue(*sealed, &fact_id, &epoch);
  WHARF_ASSERT(s.ok());
  return epoch;
}

uint64_t FactIdOf(const std::optional<std::string>& sealed) {
  if (!sealed) return 0;
  uint64_t fact_id = 0, epoch = 0;
  Status s = tables::cursors::DecodeValue(*sealed, &fact_id, &epoch);
  WHARF_ASSERT(s.ok());
  return fact_id;
}

// Adds a check per partition that the consumer's cursors are still exactly `cursors`.
void AddCursorChecks(std::string_view consumer, const RawCursors& cursors, TxnRep* rep) {
  for (uint32_t partition = 0; partition < cursors.size(); ++partition) {
    rep->checks.push_back(
        CheckOp{internal::kCursors, tables::cursors::Key(consumer, partition), cursors[partition],
                "cursor of " + std::string(consumer) + "/" + std::to_string(partition)});
  }
}

// The id of the last durable fact of `partition` with id <= fact_id, 0 if none.
// REQUIRES: the caller holds the engine's read guard.
Status LastFactAtOrBefore(const EngineCore& core, uint32_t partition, uint64_t fact_id,
                          uint64_t* found) {
  *found = 0;
  fact_id = std::min(fact_id, core.committer()->durable_lsn());
  if (fact_id == 0) return Status::OK();
  tables::Scan scan(core.store()->db(), core.store()->cf(internal::kOutbox),
                    tables::outbox::Range(partition, 0, fact_id));
  scan.SeekToLast();
  if (scan.Valid()) {
    uint32_t key_partition = 0;
    if (!tables::outbox::DecodeKey(scan.key(), &key_partition, found)) {
      return Status::Corruption("outbox key of " + std::to_string(scan.key().size()) + " bytes");
    }
    WHARF_ASSERT(key_partition == partition);
    WHARF_ASSERT(*found <= fact_id);
  }
  return FromRocks(scan.status(), "read outbox");
}

}  // namespace

Status ListCursors(Engine& engine, std::vector<CursorInfo>* cursors) {
  if (cursors == nullptr) return Status::InvalidArgument("cursors output pointer is null");
  EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  return tables::cursors::List(core.store()->db(), core.store()->cf(internal::kCursors), "",
                               cursors);
}

Status GetCursor(Engine& engine, std::string_view consumer, uint32_t partition, uint64_t* fact_id) {
  if (fact_id == nullptr) return Status::InvalidArgument("fact_id output pointer is null");
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  s = core.CheckOpen();
  if (!s.ok()) return s;
  if (partition >= core.options().partitions) {
    return Status::InvalidArgument("partition " + std::to_string(partition) + " >= partitions " +
                                   std::to_string(core.options().partitions));
  }
  tables::cursors::Stored cursor;
  s = tables::cursors::Read(*core.store(), consumer, partition, &cursor);
  *fact_id = cursor.fact_id;  // 0 when none is stored (or it failed)
  return s;
}

Status CopyCursor(Engine& engine, std::string_view from, std::string_view to, bool force) {
  Status s = ValidateConsumer(from);
  if (s.ok()) s = ValidateConsumer(to);
  if (!s.ok()) return s;
  if (from == to)
    return Status::InvalidArgument("cannot copy the cursors of '" + std::string(from) +
                                   "' onto themselves");
  EngineCore& core = *internal::EngineInternal::Core(engine);
  // A cursor may move back: no retention pass may read the cursors until this commits.
  auto rewinds = internal::RetentionOf(core)->LockCursorRewinds();
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
                                     " cursors (force to overwrite them)")
          .WithSubCode(Status::SubCode::kAlreadyExists);
    }
    AddCursorChecks(from, source, &rep);
    AddCursorChecks(to, target, &rep);
    for (uint32_t partition = 0; partition < source.size(); ++partition) {
      std::string key = tables::cursors::Key(to, partition);
      if (source[partition]) {
        std::string value =
            tables::cursors::EncodeValue(FactIdOf(source[partition]), EpochOf(target[partition]));
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

namespace {

// Changes `consumer`'s cursors in one transaction: reads them under the engine's read guard, checks
// in the transaction that they are unchanged since, and lets `change` add the writes
// (change(core, current cursors, how many exist, rep) -> Status).
// With `dry_run` it stops there: nothing is committed.
template <typename Change>
Status ChangeCursors(Engine& engine, std::string_view consumer, const Change& change,
                     bool dry_run = false) {
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *internal::EngineInternal::Core(engine);
  // A cursor may move back: no retention pass may read the cursors until this commits.
  auto rewinds = internal::RetentionOf(core)->LockCursorRewinds();
  TxnRep rep;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (!s.ok()) return s;
    RawCursors current;
    size_t count = 0;
    s = ReadRawCursors(core, consumer, &current, &count);
    if (!s.ok()) return s;
    s = change(core, current, count, &rep);
    if (!s.ok()) return s;
    // The cursors moved by hand: a retry record (tables/retries.h) no longer says where the
    // consumer is stuck; a runtime still failing on a fact stores it again.
    for (uint32_t partition = 0; partition < current.size(); ++partition) {
      rep.writes.push_back(
          WriteOp{internal::kMeta, true, tables::retries::Key(consumer, partition), ""});
    }
    AddCursorChecks(consumer, current, &rep);
  }
  WHARF_DASSERT(!rep.writes.empty());
  if (dry_run) return Status::OK();
  return core.Commit(&rep);
}

}  // namespace

Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id) {
  return SetCursor(engine, consumer, fact_id, SetCursorOptions(), nullptr);
}

Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id,
                 const SetCursorOptions& options, std::vector<CursorMove>* moves) {
  std::vector<CursorMove> planned;
  Status s = ChangeCursors(
      engine, consumer,
      [&](const EngineCore& core, const RawCursors& current, size_t, TxnRep* rep) -> Status {
        for (uint32_t partition = 0; partition < current.size(); ++partition) {
          uint64_t position = 0;
          Status found = LastFactAtOrBefore(core, partition, fact_id, &position);
          if (!found.ok()) return found;
          planned.push_back(CursorMove{partition, current[partition].has_value(),
                                       FactIdOf(current[partition]), position});
          rep->writes.push_back(
              WriteOp{internal::kCursors, false, tables::cursors::Key(consumer, partition),
                      tables::cursors::EncodeValue(position, EpochOf(current[partition]))});
        }
        WHARF_DASSERT(rep->writes.size() == core.options().partitions);
        return Status::OK();
      },
      options.dry_run);
  if (moves != nullptr) *moves = s.ok() ? std::move(planned) : std::vector<CursorMove>();
  return s;
}

Status DeleteCursor(Engine& engine, std::string_view consumer) {
  return ChangeCursors(
      engine, consumer,
      [&](const EngineCore&, const RawCursors& current, size_t count, TxnRep* rep) -> Status {
        if (count == 0) {
          return Status::NotFound("consumer '" + std::string(consumer) + "' has no cursors");
        }
        for (uint32_t partition = 0; partition < current.size(); ++partition) {
          if (!current[partition]) continue;
          rep->writes.push_back(
              WriteOp{internal::kCursors, true, tables::cursors::Key(consumer, partition), ""});
        }
        return Status::OK();
      });
}

Status ListDeadLetters(Engine& engine, std::string_view consumer, std::vector<DeadLetter>* out) {
  if (out == nullptr) return Status::InvalidArgument("dead letters output pointer is null");
  if (!consumer.empty()) {
    Status s = ValidateConsumer(consumer);
    if (!s.ok()) return s;
  }
  EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  return tables::dead_letters::List(core.store()->db(), core.store()->cf(internal::kDead), consumer,
                                    out);
}

Status ListRetentionLosses(Engine& engine, std::vector<RetentionLoss>* losses) {
  if (losses == nullptr) return Status::InvalidArgument("retention losses output pointer is null");
  EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  return tables::retention::ListLosses(core.store()->db(), core.store()->cf(internal::kMeta),
                                       losses);
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
  tables::Scan scan(core.store()->db(), core.store()->cf(internal::kDead),
                    tables::dead_letters::Range(consumer));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    DeadLetter letter;
    Status s = tables::dead_letters::DecodeEntry(scan.key(), scan.value(), &letter);
    if (!s.ok()) return s;
    WHARF_ASSERT(letter.consumer == consumer);  // the range holds only this consumer's keys
    StoredLetter& stored = (*letters)[letter.fact.id];
    stored.sealed.assign(scan.value());
    stored.letter = std::move(letter);
  }
  return FromRocks(scan.status(), "read dead letters");
}

}  // namespace

Status RetryDeadLetters(Engine& engine, std::string_view consumer,
                        const std::vector<uint64_t>& fact_ids,
                        std::vector<RetriedLetter>* retried) {
  if (retried == nullptr) return Status::InvalidArgument("retried output pointer is null");
  retried->clear();
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *internal::EngineInternal::Core(engine);
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
    TxnRep* rep = internal::EngineInternal::Rep(txn);
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
      s = internal::EngineInternal::EmitWithOrigin(txn, fact.type, fact.key, fact.payload, options,
                                                   fact.source, fact.depth);
      if (s.IsInvalidArgument()) return Status::InvalidArgument(what + ": " + s.message());
      if (!s.ok()) return s;
      std::string key = tables::dead_letters::Key(consumer, fact.id);
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

Status PurgeDeadLetters(Engine& engine, std::string_view consumer,
                        const std::vector<uint64_t>& fact_ids, uint64_t* purged) {
  if (purged == nullptr) return Status::InvalidArgument("purged output pointer is null");
  *purged = 0;
  Status s = ValidateConsumer(consumer);
  if (!s.ok()) return s;
  EngineCore& core = *internal::EngineInternal::Core(engine);
  TxnRep rep;
  {
    auto guard = core.ReadGuard();
    std::map<uint64_t, StoredLetter> letters;
    s = core.CheckOpen();
    if (s.ok()) s = ReadStoredLetters(core, consumer, &letters);
    if (!s.ok()) return s;
    if (letters.empty()) {
      return Status::NotFound("consumer '" + std::string(consumer) + "' has no dead letters");
    }
    for (uint64_t id : fact_ids) {
      if (!letters.contains(id)) {
        return Status::NotFound("consumer '" + std::string(consumer) +
                                "' has no dead letter for fact " + std::to_string(id));
      }
    }
    for (const auto& [id, stored] : letters) {
      if (!fact_ids.empty() && std::find(fact_ids.begin(), fact_ids.end(), id) == fact_ids.end()) {
        continue;
      }
      std::string key = tables::dead_letters::Key(consumer, id);
      rep.checks.push_back(
          CheckOp{internal::kDead, key, stored.sealed,
                  "dead letter " + std::to_string(id) + " of " + std::string(consumer)});
      rep.writes.push_back(WriteOp{internal::kDead, true, std::move(key), ""});
    }
  }
  // Every id named is a letter (checked above), so at least one is deleted.
  WHARF_ASSERT(!rep.writes.empty());
  WHARF_ASSERT(rep.writes.size() == rep.checks.size());
  const uint64_t deleted = rep.writes.size();  // the committer may consume the rep
  s = core.Commit(&rep);
  if (s.ok()) *purged = deleted;
  return s;
}

}  // namespace wharf
