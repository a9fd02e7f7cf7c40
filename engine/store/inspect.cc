// wharf::Inspector (wharf/inspect.h): a RocksDB secondary instance over a database directory, for
// tools (engine/store/secondary.h, shared with VerifyDatabase). Every read goes through
// the table modules (engine/store/tables/) with bounded scans and verifies each record.
#include "wharf/inspect.h"

#include <rocksdb/db.h>

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/secondary.h"
#include "engine/store/stat_reader.h"
#include "engine/store/store.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/timers.h"

namespace wharf {

namespace internal {

// What an open Inspector holds (the pimpl of wharf::Inspector): the secondary instance and what
// the meta family said at the open.
struct InspectorState : SecondaryDb {
  uint64_t format_version = 0;
  uint32_t partitions = 0;
  Ordering ordering = Ordering::kPartition;
};

}  // namespace internal

using internal::FromRocks;
using internal::InspectorState;
using internal::kCfCount;
using internal::kFormatVersion;

namespace {

// The shared readers' view of the secondary (engine/store/stat_reader.h): every fact written.
internal::StoreView ViewOf(const InspectorState& state) {
  internal::StoreView view;
  view.db = state.db.get();
  for (int cf = 0; cf < kCfCount; ++cf) view.cfs[cf] = state.handles[cf];
  view.partitions = state.partitions;
  return view;
}

Status GetMeta(const InspectorState& state, const std::string& key, std::string* body,
               bool* found) {
  std::string sealed;
  rocksdb::Status s =
      state.db->Get(rocksdb::ReadOptions(), state.handles[internal::kMeta], key, &sealed);
  *found = s.ok();
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return FromRocks(s, "read meta " + key);
  std::string_view unsealed;
  Status status = codec::Unseal(sealed, &unsealed);
  if (!status.ok()) return Status::Corruption("meta " + key + ": " + status.message());
  body->assign(unsealed);
  return Status::OK();
}

Status LoadMeta(InspectorState* state) {
  std::string body;
  bool found = false;
  Status s = GetMeta(*state, tables::meta::kFormatVersion, &body, &found);
  if (!s.ok()) return s;
  if (!found) {
    return Status::InvalidArgument(state->path + " is not a Wharf database (no format version)");
  }
  s = tables::meta::DecodeU64(body, tables::meta::kFormatVersion, &state->format_version);
  if (!s.ok()) return s;
  if (state->format_version > kFormatVersion) {
    return Status::NotSupported("database format version " + std::to_string(state->format_version) +
                                " is newer than this Wharf supports (" +
                                std::to_string(kFormatVersion) + "): upgrade Wharf");
  }
  uint64_t partitions = 0, ordering = 0;
  for (auto [name, target] : {std::pair{tables::meta::kPartitions, &partitions},
                              std::pair{tables::meta::kOrdering, &ordering}}) {
    s = GetMeta(*state, name, &body, &found);
    if (s.ok() && !found) s = Status::Corruption(std::string("meta ") + name + " is missing");
    if (s.ok()) s = tables::meta::DecodeU64(body, name, target);
    if (!s.ok()) return s;
  }
  if (partitions == 0 || partitions > kPartitionsMax) {
    return Status::Corruption("meta partitions holds " + std::to_string(partitions));
  }
  if (ordering > static_cast<uint64_t>(Ordering::kNone)) {
    return Status::Corruption("meta ordering holds " + std::to_string(ordering));
  }
  state->partitions = static_cast<uint32_t>(partitions);
  state->ordering = static_cast<Ordering>(ordering);
  return Status::OK();
}

}  // namespace

uint64_t FormatVersion() { return kFormatVersion; }

bool TakenFilter::Takes(const Fact& fact) const {
  if (!types.contains(fact.type)) return false;
  // A fact re-emitted from a dead letter goes to the consumer it names, and to no other.
  for (const auto& [header, value] : fact.headers) {
    if (header == kRetryForHeader) return value == consumer;
  }
  return true;
}

Status Inspector::Open(const std::string& path, std::unique_ptr<Inspector>* out) {
  if (out == nullptr) return Status::InvalidArgument("inspector out-parameter is null");
  auto state = std::make_unique<InspectorState>();
  Status loaded = internal::OpenSecondary(path, state.get());
  if (loaded.ok()) loaded = LoadMeta(state.get());
  if (!loaded.ok()) return loaded;
  out->reset(new Inspector(std::move(state)));
  return Status::OK();
}

Inspector::Inspector(std::unique_ptr<InspectorState> state) : impl_(std::move(state)) {
  WHARF_ASSERT(impl_ != nullptr && impl_->db != nullptr);
}
Inspector::~Inspector() = default;

Status Inspector::CatchUp() { return impl_->CatchUp(); }
const std::string& Inspector::path() const { return impl_->path; }
uint64_t Inspector::format_version() const { return impl_->format_version; }
uint32_t Inspector::partitions() const { return impl_->partitions; }
Ordering Inspector::ordering() const { return impl_->ordering; }

namespace {

// The first fact id of `partition` a reader may see: above its retention floor (the facts at or
// below it are removed, even where RocksDB still holds them; engine/store/outbox_floors.h).
Status FirstVisible(const internal::InspectorState& impl, uint32_t partition, uint64_t* id) {
  std::vector<uint64_t> first_ids;
  Status s = internal::ReadFirstVisible(ViewOf(impl), &first_ids);
  if (!s.ok()) return s;
  *id = first_ids[partition];
  return Status::OK();
}

}  // namespace

Status Inspector::LastLsn(uint64_t* lsn) {
  std::string body;
  bool found = false;
  Status s = GetMeta(*impl_, tables::meta::kLastLsn, &body, &found);
  if (!s.ok()) return s;
  *lsn = 0;
  return found ? tables::meta::DecodeU64(body, tables::meta::kLastLsn, lsn) : Status::OK();
}

Status Inspector::DeclaredTypes(std::vector<std::string>* types) {
  std::vector<DeclaredType> declared;
  Status s = DeclaredTypeVersions(&declared);
  types->clear();
  for (DeclaredType& type : declared) types->push_back(std::move(type.name));
  return s;
}

Status Inspector::DeclaredTypeVersions(std::vector<DeclaredType>* types) {
  return tables::meta::ListTypes(impl_->db.get(), impl_->handles[internal::kMeta], types);
}

Status Inspector::PartitionStats(std::vector<PartitionStat>* stats) {
  return internal::ReadPartitionStats(ViewOf(*impl_), stats);
}

Status Inspector::BacklogAfter(uint32_t partition, uint64_t after_id, const TakenFilter* filter,
                               Backlog* backlog) {
  const internal::StoreView view = ViewOf(*impl_);
  std::vector<uint64_t> first_ids;
  Status s = internal::ReadFirstVisible(view, &first_ids);
  if (!s.ok()) return s;
  uint64_t first_id = partition < first_ids.size() ? first_ids[partition] : 0;
  return internal::ReadBacklog(view, partition, after_id, first_id, filter, backlog);
}

Status Inspector::Stat(StatSnapshot* snapshot) {
  if (snapshot == nullptr) return Status::InvalidArgument("snapshot output pointer is null");
  // A secondary sees what the primary wrote, not what it acknowledged durable.
  snapshot->durable_lsn_known = false;
  snapshot->durable_lsn = 0;
  Status s = LastLsn(&snapshot->last_lsn);
  if (!s.ok()) return s;
  return internal::ReadStatSnapshot(ViewOf(*impl_), snapshot);
}

Status Inspector::ConsumerStats(std::string_view consumer, std::vector<ConsumerStat>* consumers) {
  return internal::ReadConsumerStats(ViewOf(*impl_), consumer, consumers);
}

Status Inspector::ConsumerTypes(std::map<std::string, std::vector<std::string>>* consumers) {
  return tables::meta::ListConsumerTypes(impl_->db.get(), impl_->handles[internal::kMeta],
                                         consumers);
}

Status Inspector::ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                            std::vector<Fact>* facts) {
  if (partition >= impl_->partitions) return Status::InvalidArgument("partition out of range");
  uint64_t first_visible = 0;
  Status visible = FirstVisible(*impl_, partition, &first_visible);
  if (!visible.ok()) return visible;
  tables::Scan scan(impl_->db.get(), impl_->handles[internal::kOutbox],
                    tables::outbox::Range(partition, std::max(from_id, first_visible)));
  for (scan.SeekToFirst(); scan.Valid() && count_max > 0; scan.Next(), --count_max) {
    Status s =
        tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  return FromRocks(scan.status(), "read outbox");
}

Status Inspector::ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts) {
  if (partition >= impl_->partitions) return Status::InvalidArgument("partition out of range");
  uint64_t first_visible = 0;
  Status visible = FirstVisible(*impl_, partition, &first_visible);
  if (!visible.ok()) return visible;
  tables::Scan scan(impl_->db.get(), impl_->handles[internal::kOutbox],
                    tables::outbox::Range(partition, first_visible));
  size_t first = facts->size();
  for (scan.SeekToLast(); scan.Valid() && count_max > 0; scan.Prev(), --count_max) {
    Status s =
        tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  std::reverse(facts->begin() + static_cast<std::ptrdiff_t>(first), facts->end());
  return FromRocks(scan.status(), "read outbox");
}

Status Inspector::Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors) {
  return tables::cursors::List(impl_->db.get(), impl_->handles[internal::kCursors], consumer,
                               cursors);
}

Status Inspector::Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances) {
  return tables::leases::List(impl_->db.get(), impl_->handles[internal::kLeases], leases,
                              instances);
}

Status Inspector::OpenEpoch(uint64_t* open_epoch) {
  std::string body;
  bool found = false;
  Status s = GetMeta(*impl_, tables::meta::kOpenEpoch, &body, &found);
  if (!s.ok()) return s;
  *open_epoch = 0;
  return found ? tables::meta::DecodeU64(body, tables::meta::kOpenEpoch, open_epoch) : Status::OK();
}

Status Inspector::Timers(TimerStat* timers) {
  return internal::ReadTimerStat(ViewOf(*impl_), timers);
}

Status Inspector::DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters) {
  return tables::dead_letters::List(impl_->db.get(), impl_->handles[internal::kDead], consumer,
                                    letters);
}

Status Inspector::DeadLetterCount(uint64_t* count) {
  return internal::CountDeadLetters(ViewOf(*impl_), count);
}

}  // namespace wharf
