// Effects: what projection and reaction handlers write, forwarded to the batch's transaction.
#include "engine/runtime/effects.h"

#include "engine/base/assert.h"
#include "engine/runtime/lane.h"
#include "engine/store/codec.h"
#include "engine/store/tables/state.h"

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
  // Read through the batch: an earlier fact's effects in this (uncommitted) batch are visible,
  // so read-modify-write aggregates count every fact once whatever the batch size.
  const TxnRep* rep = EngineCore::RepOf(*txn_);
  if (rep != nullptr && !table.empty() && !key.empty()) {
    std::string state_key = tables::state::Key(table, key);
    for (auto it = rep->writes.rbegin(); it != rep->writes.rend(); ++it) {
      if (it->cf != kState || it->key != state_key) continue;
      if (it->is_delete) {
        return Status::NotFound("no key " + DescribeBytes(key) + " in table '" +
                                std::string(table) + "'");
      }
      std::string_view body;
      Status s = codec::Unseal(it->value, &body);
      if (s.ok()) value->assign(body);
      return s;
    }
  }
  // Earlier batches of the lane still in flight wrote what this batch must read on: their
  // outcome first (a batch after a refused one is refused too, so a read of state they did not
  // change is never committed on). Beyond them, without waiting for durability: whatever this
  // reads was written before this batch, which commits after it, so the batch's effects are never
  // durable without what they were based on.
  if (lane_ != nullptr) lane_->AwaitBatchesInFlight();
  return EngineCore::CoreOf(*txn_)->GetState(table, key, value, /*durable_only=*/false);
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
