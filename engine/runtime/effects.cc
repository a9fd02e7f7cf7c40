// Effects: what projection and reaction handlers write, forwarded to the batch's transaction.
#include "engine/runtime/effects.h"

#include "engine/base/assert.h"
#include "engine/runtime/cursor_chain.h"

namespace wharf {

Status Effects::Put(std::string_view table, std::string_view key, std::string_view value) {
  return impl_->Put(table, key, value);
}
Status Effects::Delete(std::string_view table, std::string_view key) {
  return impl_->Delete(table, key);
}
Status Effects::Get(std::string_view table, std::string_view key, std::string* value) const {
  return impl_->Get(table, key, value);
}
Status Effects::Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
                     ScanResult* result) const {
  return impl_->Scan(table, range, limit, row, result);
}
Status Effects::Emit(std::string_view type, std::string_view key, std::string_view payload,
                     const EmitOptions& options) {
  return impl_->Emit(type, key, payload, options);
}

namespace internal {

Status EffectsImpl::Note(Status status, const char* name) {
  if (!status.ok() && failure_name_.empty()) {
    failure_name_ = name;
    failure_ = status;
  }
  return status;
}

namespace {

Status BatchFull(size_t bytes_max) {
  return Status::InvalidArgument(
      "the batch's transaction would pass " + std::to_string(bytes_max) +
      " bytes with this effect: the batch ends before this fact, which runs again in the next");
}

}  // namespace

bool EffectsImpl::CrossesBecauseOfBatch(size_t bytes) {
  const size_t total = EngineCore::RepOf(*txn_)->bytes;
  const size_t bytes_max = EngineCore::CoreOf(*txn_)->txn_bytes_max();
  WHARF_DASSERT(total >= batch_bytes_before_);
  const size_t own = total - batch_bytes_before_;
  if (batch_bytes_before_ == 0 || total + bytes <= bytes_max || own + bytes > bytes_max) {
    return false;
  }
  batch_full_ = true;
  return true;
}

// The byte counts below are the ones Txn charges (engine.cc): names, keys and values as given.
Status EffectsImpl::Put(std::string_view table, std::string_view key, std::string_view value) {
  if (CrossesBecauseOfBatch(table.size() + key.size() + value.size()))
    return BatchFull(EngineCore::CoreOf(*txn_)->txn_bytes_max());
  return Note(txn_->Put(table, key, value), "store-rejected");
}

Status EffectsImpl::Delete(std::string_view table, std::string_view key) {
  if (CrossesBecauseOfBatch(table.size() + key.size()))
    return BatchFull(EngineCore::CoreOf(*txn_)->txn_bytes_max());
  return Note(txn_->Delete(table, key), "store-rejected");
}

Status EffectsImpl::Get(std::string_view table, std::string_view key, std::string* value) const {
  // Earlier batches of the lane still in flight wrote what this batch must read on: their
  // outcome first (a batch after a refused one is refused too, so a read of state they did not
  // change is never committed on). Then the batch's transaction reads: its own effects so far (an
  // earlier fact's, so read-modify-write aggregates count every fact once whatever the batch
  // size), else its snapshot, without waiting for durability (the batch commits after what it
  // read, so its effects are never durable without it). The read is validated at commit: a row
  // another writer changed meanwhile refuses the batch, which the lane delivers again.
  if (chain_ != nullptr) chain_->AwaitSettled();
  return txn_->Get(table, key, value);
}

Status EffectsImpl::Scan(std::string_view table, const KeyRange& range, size_t limit,
                         const RowFn& row, ScanResult* result) const {
  if (chain_ != nullptr) chain_->AwaitSettled();  // as Get
  return txn_->Scan(table, range, limit, row, result);
}

Status EffectsImpl::Emit(std::string_view type, std::string_view key, std::string_view payload,
                         const EmitOptions& options) {
  if (consumer_->kind != ConsumerKind::kReaction) {
    return Note(Status::InvalidArgument("projection '" + consumer_->name +
                                        "' may not emit facts; make it a reaction"),
                "store-rejected");
  }
  uint32_t depth = trigger_->depth + 1;
  if (depth > consumer_->max_depth) {
    return Note(Status::InvalidArgument("emitting '" + std::string(type) + "' at depth " +
                                        std::to_string(depth) + " exceeds max_depth " +
                                        std::to_string(consumer_->max_depth)),
                "cascade-exceeded");
  }
  size_t bytes = type.size() + key.size() + payload.size();
  for (const auto& [name, value] : options.headers) bytes += name.size() + value.size();
  if (CrossesBecauseOfBatch(bytes)) return BatchFull(EngineCore::CoreOf(*txn_)->txn_bytes_max());
  return Note(
      EngineInternal::EmitWithOrigin(*txn_, type, key, payload, options, consumer_->id, depth),
      "store-rejected");
}

}  // namespace internal
}  // namespace wharf
