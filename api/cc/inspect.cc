// wharf::Inspector (wharf/inspect.h): the public face of the secondary reader in
// engine/store/inspect.h, which does the work.
#include "wharf/inspect.h"

#include "engine/base/assert.h"
#include "engine/store/inspect.h"
#include "engine/store/store.h"

namespace wharf {

uint64_t FormatVersion() { return internal::kFormatVersion; }

bool TakenFilter::Takes(const Fact& fact) const {
  if (!types.contains(fact.type)) return false;
  // A fact re-emitted from a dead letter goes to the consumer it names, and to no other.
  for (const auto& [header, value] : fact.headers) {
    if (header == kRetryForHeader) return value == consumer;
  }
  return true;
}

Status Inspector::Open(const std::string& path, std::unique_ptr<Inspector>* inspector) {
  if (inspector == nullptr) return Status::InvalidArgument("inspector out-parameter is null");
  std::unique_ptr<internal::Inspector> impl;
  Status s = internal::Inspector::Open(path, &impl);
  if (!s.ok()) return s;
  WHARF_ASSERT(impl != nullptr);
  inspector->reset(new Inspector(std::move(impl)));
  return Status::OK();
}

Inspector::Inspector(std::unique_ptr<internal::Inspector> impl) : impl_(std::move(impl)) {}
Inspector::~Inspector() = default;

Status Inspector::CatchUp() { return impl_->CatchUp(); }
const std::string& Inspector::path() const { return impl_->path(); }
uint64_t Inspector::format_version() const { return impl_->format_version(); }
uint32_t Inspector::partitions() const { return impl_->partitions(); }
Ordering Inspector::ordering() const { return impl_->ordering(); }
Status Inspector::LastLsn(uint64_t* lsn) { return impl_->LastLsn(lsn); }
Status Inspector::DeclaredTypes(std::vector<std::string>* types) {
  return impl_->DeclaredTypes(types);
}
Status Inspector::PartitionStats(std::vector<PartitionStat>* stats) {
  return impl_->PartitionStats(stats);
}
Status Inspector::BacklogAfter(uint32_t partition, uint64_t after_id, const TakenFilter* filter,
                               Backlog* backlog) {
  return impl_->BacklogAfter(partition, after_id, filter, backlog);
}
Status Inspector::ConsumerTypes(std::map<std::string, std::vector<std::string>>* consumers) {
  return impl_->ConsumerTypes(consumers);
}
Status Inspector::ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                            std::vector<Fact>* facts) {
  return impl_->ReadFacts(partition, from_id, count_max, facts);
}
Status Inspector::ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts) {
  return impl_->ReadLastFacts(partition, count_max, facts);
}
Status Inspector::Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors) {
  return impl_->Cursors(consumer, cursors);
}
Status Inspector::Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances) {
  return impl_->Leases(leases, instances);
}
Status Inspector::OpenEpoch(uint64_t* open_epoch) { return impl_->OpenEpoch(open_epoch); }
Status Inspector::Timers(TimerStat* timers) { return impl_->Timers(timers); }
Status Inspector::DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters) {
  return impl_->DeadLetters(consumer, letters);
}
Status Inspector::DeadLetterCount(uint64_t* count) { return impl_->DeadLetterCount(count); }

}  // namespace wharf
